"""experiments/metrix_mixup: alignment/uniformity against a direct double loop; smoke run."""

import json
import math

import torch
from tests.helpers.experiments import load_experiment

metrix = load_experiment("metrix_mixup")


def test_alignment_and_uniformity_match_a_double_loop():
    torch.manual_seed(0)
    embeddings = torch.randn(9, 5)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 2, 3, 0])
    e = [v / v.norm() for v in embeddings.double()]
    positives, pairs = [], []
    for i in range(9):
        for j in range(9):
            if i != j:
                d2 = float(((e[i] - e[j]) ** 2).sum())
                pairs.append(math.exp(-2.0 * d2))
                if labels[i] == labels[j]:
                    positives.append(d2)
    align, uniform = metrix.alignment_uniformity(embeddings, labels)
    assert math.isclose(align, sum(positives) / len(positives), rel_tol=1e-9)
    assert math.isclose(uniform, math.log(sum(pairs) / len(pairs)), rel_tol=1e-9)


def test_smoke_run_trains_clean_and_feature_mixup(tmp_path):
    payload = metrix.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["table"] == payload["table"] and list(payload["results"]) == list(metrix.SMOKE["variants"])
    for entry in payload["results"].values():
        assert len(entry["alignment"]["values"]) == len(metrix.SMOKE["seeds"])
        assert 0.0 <= entry["alignment"]["mean"] <= 4.0 and -4.0 <= entry["uniformity"]["mean"] <= 0.0


def test_nonlinear_wiring_makes_feature_mixup_differ_from_embedding_mixup():
    """Mixing maps then embedding equals mixing the un-normalised embeddings under the linear
    wiring (1x1 head, GAP), and not under GAP+GMP followed by the embedding layer."""
    from tests.helpers.experiments import load_common

    from gspdml.models import build_embedder

    common = load_common()
    torch.manual_seed(0)
    maps = torch.randn(2, 128, 8, 8)
    gaps = {}
    for wiring, overrides in metrix.WIRINGS.items():
        cfg = common.config("metrix-demo.yaml", list(overrides), steps=1, name="probe")
        model = build_embedder(cfg["model"], in_channels=1).eval()
        with torch.no_grad():
            mixed = model.embed_features(0.3 * maps[:1] + 0.7 * maps[1:]).pooled
            separate = model.embed_features(maps).pooled
        gaps[wiring] = float((mixed - (0.3 * separate[:1] + 0.7 * separate[1:])).abs().max())
    assert gaps["linear"] < 1e-4 and gaps["nonlinear"] > 1e-2

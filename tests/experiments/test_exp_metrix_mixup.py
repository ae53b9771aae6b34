"""experiments/metrix_mixup: alignment/uniformity against a direct double loop; smoke run."""

import json
import math

import torch
from exp_loader import load_experiment

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

"""experiments/metrix_mixup: alignment/uniformity against a direct double loop; the verdict rows
on hand-made tables; the wiring after the mixing point; smoke run."""

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


def _entry(mean, std):
    return {"map_at_r": {"values": [mean], "mean": mean, "std": std}, "failed": {}}


def test_reproduction_rows_apply_the_verdict_rule_per_claim():
    table = {
        "clean": _entry(20.0, 0.5),
        "input": _entry(20.4, 1.0),
        "feature": _entry(25.0, 0.5),
        "embedding": _entry(19.0, 0.5),
    }
    runs = {
        "finetune ResNet20, nonlinear wiring": {"results": table},
        "partial": {"results": {"clean": table["clean"]}},
    }
    (row,) = metrix.reproduction(runs)  # a run without every variant gives no row
    assert row["experiment"].startswith("Metrix mixup, finetune ResNet20")
    verdicts = dict(part.split(": ", 1) for part in row["verdict"].split("; "))
    assert verdicts == {
        "input > clean": "partly (highest mean, within one std of another)",
        "feature > clean": "reproduced",
        "embedding > clean": "not reproduced (clean as high or higher)",
        "feature best": "reproduced",
    }
    table["input"] = _entry(26.0, 0.5)
    (row,) = metrix.reproduction(runs)
    assert row["verdict"].endswith("feature best: not reproduced (input as high or higher)")


def test_variants_share_the_regime_and_differ_only_in_the_mixing():
    cfgs = {v: metrix.run_config(v) for v in metrix.VARIANTS}
    for cfg in cfgs.values():
        assert (
            cfg["data"]["dataset"]["name"] == "collage_shared"
            and cfg["model"]["backbone"]["weights"] == "resnet20-digits"
        )
        assert (
            cfg["model"]["backbone"]["frozen"] is False
            and cfg["model"]["pooling"]["name"] == "gap_gmp"
        )
        assert cfg["model"]["head"] == "global" and cfg["schedule"]["max_steps"] == 200
    assert {v: (c["loss"]["level"], c["loss"]["mix_weight"]) for v, c in cfgs.items()} == {
        "clean": ("embedding", 0.0),
        "input": ("input", 0.4),
        "feature": ("feature", 0.4),
        "embedding": ("embedding", 0.4),
    }
    strip = lambda c: {k: v for k, v in c.items() if k not in ("loss", "name")}  # noqa: E731
    assert all(strip(c) == strip(cfgs["clean"]) for c in cfgs.values())


def test_nonlinear_wiring_makes_feature_mixup_differ_from_embedding_mixup():
    """Mixing maps then embedding equals mixing the un-normalised embeddings under the linear
    wiring (1x1 head, GAP), and not under GAP+GMP followed by the embedding layer."""
    from gspdml.models import build_embedder

    torch.manual_seed(0)
    images = torch.rand(2, 3, 32, 32)
    gaps = {}
    for wiring in metrix.WIRINGS:
        model_cfg = metrix.run_config("feature", wiring=wiring)["model"]
        model_cfg["backbone"]["weights"] = None
        model = build_embedder(model_cfg, in_channels=3).eval()
        with torch.no_grad():
            maps = model.backbone(images)
            mixed = model.embed_features(0.3 * maps[:1] + 0.7 * maps[1:]).pooled
            separate = model.embed_features(maps).pooled
        gaps[wiring] = float((mixed - (0.3 * separate[:1] + 0.7 * separate[1:])).abs().max())
    assert gaps["linear"] < 1e-4 and gaps["nonlinear"] > 1e-3


def test_smoke_run_trains_clean_and_feature_mixup(tmp_path):
    payload = metrix.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["table"] == payload["table"] and list(payload["results"]) == list(
        metrix.SMOKE["variants"]
    )
    assert [line.split(" | ")[0].strip("| ") for line in payload["table"].splitlines()[2:]] == list(
        metrix.SMOKE["variants"]
    )
    for entry in payload["results"].values():
        assert len(entry["alignment"]["values"]) == len(metrix.SMOKE["seeds"])
        assert (
            0.0 <= entry["alignment"]["mean"] <= 4.0 and -4.0 <= entry["uniformity"]["mean"] <= 0.0
        )


def test_paired_gain_subtracts_the_clean_run_of_the_same_seed():
    clean = {"map_at_r": {"values": [10.0, 20.0, 30.0]}}
    mixed = {"map_at_r": {"values": [11.0, 23.0, 35.0]}}  # gains 1, 3, 5: mean 3, sample std 2
    assert metrix.paired_gain(mixed, clean) == "+3.00 ± 2.00"
    assert (
        metrix.paired_gain(mixed, None) == "-"
        and metrix.paired_gain(mixed, {"map_at_r": {"values": [1.0]}}) == "-"
    )

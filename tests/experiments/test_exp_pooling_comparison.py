"""experiments/pooling_comparison: every pooling gives a 128-D embedding in the papers' wiring;
the smoke run tabulates with the target-tile weight share and the README verdict rule."""

import json

import pytest
import torch

from tests.helpers.experiments import load_common, load_experiment

pooling = load_experiment("pooling_comparison")
common = load_common()


@pytest.mark.parametrize("name", list(pooling.POOLINGS))
def test_every_compared_pooling_embeds_in_128_dimensions(name):
    cfg = pooling.run_config(name, "C2", "frozen", smoke=True)
    from gspdml.models import build_embedder
    from gspdml.training.pretrain import resolve_recipe_weights

    model = build_embedder(resolve_recipe_weights(cfg["model"]), in_channels=1).eval()
    with torch.no_grad():
        embedding = model(torch.randn(2, 1, 32, 32)).embedding
    assert embedding.shape == (2, 128)
    torch.testing.assert_close(embedding.norm(dim=1), torch.ones(2))
    # the authors' wiring: baselines pool then project, GSP's embedding convolution comes first
    assert cfg["model"]["head"] == ("local" if name == "GSP" else "global")
    assert not any(p.requires_grad for p in model.backbone.parameters())


def test_finetune_regime_trains_the_backbone_at_a_tenth_of_the_rate():
    cfg = pooling.run_config("GAP", "C2", "finetune", smoke=True)
    assert (
        cfg["model"]["backbone"]["frozen"] is False
        and cfg["optimizer"]["lr_multipliers"]["backbone"] == 0.1
    )


def test_smoke_run_prints_the_table4_layout(tmp_path):
    payload = pooling.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    lines = saved["table"].splitlines()
    assert lines[0].startswith(
        "| pooling (128D MAP@R) | frozen C2 | target-tile weight C2 | paper Cifar Collage C2 |"
    )
    assert [line.split(" | ")[0].lstrip("| ") for line in lines[2:]] == list(
        pooling.SMOKE["poolings"]
    )
    for name in pooling.SMOKE["poolings"]:
        values = payload["results"][name]["C2"]["map_at_r"]["values"]
        assert len(values) == len(pooling.SMOKE["seeds"]) and all(0.0 <= v <= 100.0 for v in values)
    share = payload["results"]["GSP"]["C2"]["target_share"]["values"][0]
    assert 0.0 <= share <= 1.0 and "target_share" not in payload["results"]["GAP"]["C2"]
    assert (
        "| GSP |" in saved["table"] and "| 22.68 |" in saved["table"]
    )  # the paper's Cifar-Collage C2 value
    rows = pooling.reproduction({"frozen": saved})
    assert len(rows) == 1 and rows[0]["paper"] == "GAP 8.09; GSP 22.68"


def entry(mean, std):
    return {"map_at_r": {"mean": mean, "std": std}}


def test_verdict_rule():
    assert common.verdict(entry(60, 2), {"GAP": entry(20, 3), "GMP": entry(30, 5)}) == "reproduced"
    assert common.verdict(entry(60, 2), {"GMP": entry(57, 2)}).startswith("partly")
    assert (
        common.verdict(entry(60, 2), {"GAP": entry(20, 3), "GMP": entry(61, 1)})
        == "not reproduced (GMP as high or higher)"
    )


def test_sources_and_backbones_set_their_data_weights_and_keys():
    fashion = pooling.run_config("GMP", "C2", "frozen", smoke=False, source="fashion")
    assert (
        fashion["data"]["dataset"]["source"] == "fashion"
        and fashion["data"]["dataset"]["tile_size"] == 28
    )
    assert (
        fashion["model"]["backbone"]["weights"] == "resnet20-fashion"
        and fashion["name"] == "frozen-fashion-gmp-c2"
    )
    digits = pooling.run_config("GMP", "C2", "frozen", smoke=False)
    assert (
        digits["model"]["backbone"]["weights"] == "resnet20-digits"
        and digits["name"] == "frozen-gmp-c2"
    )
    effnet = pooling.run_config(
        "GSP", "ProxyNCA++", "frozen", smoke=False, backbone="efficientnet_lite0", source="fashion"
    )
    assert effnet["model"]["backbone"] == {
        "name": "efficientnet_lite0",
        "input_size": 256,
        "frozen": True,
    }
    assert (
        effnet["model"]["cache_backbone_features"] is True
        and effnet["data"]["dataset"]["source"] == "fashion"
    )
    assert effnet["name"] == "efficientnet_lite0-frozen-fashion-gsp-proxyncapp"
    assert (
        pooling.run_key("finetune") == "finetune"
        and pooling.run_key("frozen", "efficientnet_lite0") == "efficientnet_lite0-frozen"
    )


def summary_of(values):
    """A :func:`common.summary` entry of one loss from per-seed MAP@R values (x100)."""
    results = [
        {"test": {"map_at_r": v / 100, "precision_at_1": v / 100}, "seconds": 1.0, "seed": s}
        for s, v in enumerate(values)
    ]
    return common.summary(results, pooling.METRICS)


def test_merge_puts_new_poolings_into_the_published_run_in_table_order(tmp_path, monkeypatch):
    """``--merge``: the published run keeps its other poolings, the merged ones replace theirs,
    the order is the script's, the table is rebuilt and the times add up; a run of other seeds
    is refused."""
    monkeypatch.setattr(common, "ROOT", tmp_path)
    folder = tmp_path / "experiments" / "pooling_comparison"
    folder.mkdir(parents=True)
    plan = {"seeds": [0, 1], "poolings": ["GAP", "GSP"], "losses": ["C2"]}
    stored = {
        "plan": plan,
        "regime": "frozen",
        "results": {"GAP": {"C2": summary_of([7, 8])}, "GSP": {"C2": summary_of([38, 40])}},
        "seconds": 10.0,
        "threads": 1,
    }
    (folder / "results.json").write_text(json.dumps({"runs": {"frozen": stored}}))
    new = {
        "plan": {**plan, "poolings": ["VLAD", "GAP"]},
        "results": {"VLAD": {"C2": summary_of([41, 42])}, "GAP": {"C2": summary_of([9, 9])}},
        "seconds": 5.0,
    }
    merged = pooling.merged("frozen", new)
    assert list(merged["results"]) == ["VLAD", "GAP", "GSP"]  # the order of POOLINGS
    assert merged["plan"]["poolings"] == ["VLAD", "GAP", "GSP"]
    assert merged["plan"]["merged"] == ["VLAD", "GAP"]
    assert merged["results"]["GAP"]["C2"]["map_at_r"]["values"] == [9.0, 9.0]
    assert merged["results"]["GSP"] == stored["results"]["GSP"]
    assert merged["seconds"] == 15.0 and merged["threads"] == 1
    rows = merged["table"].splitlines()[2:]
    assert [r.split(" | ")[0].lstrip("| ") for r in rows] == ["VLAD", "GAP", "GSP"]
    assert rows[0].startswith("| VLAD | 41.50 ± 0.71 |") and "| 21.73 |" in rows[0]
    verdict = pooling.reproduction({"frozen": merged})[0]["verdict"]
    assert verdict == "not reproduced (VLAD as high or higher)"
    with pytest.raises(SystemExit, match="has seeds \\[0, 1\\]"):
        pooling.merged("frozen", {**new, "plan": {**new["plan"], "seeds": [0, 1, 2]}})
    with pytest.raises(SystemExit, match="no published run 'finetune'"):
        pooling.merged("finetune", new)

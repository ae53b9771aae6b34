"""experiments/collage: the smoke run trains, tests, tabulates and draws the weight maps."""

import json

import pytest
import torch

from tests.helpers.experiments import load_common, load_experiment

collage = load_experiment("collage")
common = load_common()


def test_smoke_run_writes_results_table_and_weight_maps(tmp_path):
    payload = collage.main(["--smoke", "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["table"] == payload["table"]
    entries = saved["results"]
    assert set(entries) == set(collage.SMOKE["methods"])
    for entry in entries.values():
        assert (
            len(entry["map_at_r"]["values"]) == len(collage.SMOKE["seeds"]) and not entry["failed"]
        )
        assert all(
            0.0 <= v <= 100.0
            for v in entry["map_at_r"]["values"] + entry["precision_at_1"]["values"]
        )
    for plot in saved["plots"]:
        assert open(plot, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    # the distilled baseline is trained on the target tile alone
    from gspdml.training import load_run

    cfg, _ = load_run(tmp_path / "frozen-distilled" / "seed0")
    assert (
        cfg["data"]["dataset"]["name"] == "collage_shared" and cfg["data"]["dataset"]["grid"] == 1
    )


def test_pooling_weights_are_the_models_spatial_weights():
    from gspdml.data.arrays import ArrayDataset
    from gspdml.models import build_embedder

    torch.manual_seed(0)
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn"},
            "embedding_dim": 16,
            "pooling": {"name": "gsp", "num_prototypes": 4, "mu": 0.3},
        },
        in_channels=1,
    )
    images = torch.randint(0, 256, (5, 1, 32, 32), dtype=torch.uint8).numpy()
    dataset = ArrayDataset(images, torch.arange(5).numpy())
    weights = common.pooling_weights(model, dataset, [4, 1])
    expected = model(torch.stack([dataset[4][0], dataset[1][0]])).weights
    assert len(weights) == 2 and weights[0].shape == (8, 8)
    torch.testing.assert_close(torch.stack(weights), expected)
    gap = build_embedder(
        {"backbone": {"name": "small_cnn"}, "embedding_dim": 16, "pooling": {"name": "gap"}},
        in_channels=1,
    )
    assert common.pooling_weights(gap, dataset, [0, 2]) == [None, None]
    assert common.display_image(dataset, 3).shape == (32, 32, 1)


def test_merge_adds_methods_to_the_published_run_and_keeps_the_others(tmp_path, monkeypatch):
    stored = {"plan": {"seeds": [0, 1, 2]}, "results": {"gap": {"m": 1}, "gsp_zsr": {"m": 2}}}
    published = tmp_path / "results.json"
    published.write_text(json.dumps({"runs": {"frozen": stored}}))
    monkeypatch.setattr(collage, "PUBLISHED", published)
    table = collage.merged("frozen", {"seeds": (0, 1, 2)}, {"gsp_zsr": {"m": 3}, "new": {"m": 4}})
    assert table == {"gap": {"m": 1}, "gsp_zsr": {"m": 3}, "new": {"m": 4}}
    with pytest.raises(SystemExit, match="has seeds"):
        collage.merged("frozen", {"seeds": (0,)}, {})


def test_the_unit_init_method_differs_from_the_demo_in_the_init_alone():
    he, default = (collage.run_config(m, "frozen") for m in ("gsp_zsr", "gsp_zsr_unit"))
    assert default.loss["class_init"] == "unit" and he.loss["class_init"] == "he_normal"
    assert {k: v for k, v in he.loss.items() if k != "class_init"} == {
        k: v for k, v in default.loss.items() if k != "class_init"
    }

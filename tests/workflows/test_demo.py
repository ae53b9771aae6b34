from gspdml.config import load_config
from gspdml.workflows.demo import demo_configs, format_table


def test_table_lists_test_metrics_in_percent_and_marks_reused_runs():
    rows = [
        {
            "method": "gap",
            "steps": 600,
            "seconds": 83.2,
            "target_share": 0.25,
            "test": {
                "map_at_r": 0.7437,
                "precision_at_1": 0.965,
                "r_precision": 0.7869,
                "recall_at_2": 0.9838,
                "recall_at_4": 0.9912,
            },
        },
        {
            "method": "gsp",
            "steps": 600,
            "seconds": None,
            "reused": True,
            "test": {"map_at_r": 0.8819},
        },
        {"method": "gmp", "steps": 600, "seconds": 41.0, "reused": True, "test": {"map_at_r": 0.5}},
    ]
    lines = format_table(rows).splitlines()
    assert lines[0].startswith("| method | MAP@R | P@1 |")
    assert lines[2] == "| gap | 74.37 | 96.50 | 78.69 | 98.38 | 99.12 | 0.25 | 600 | 83 |"
    assert lines[3] == "| gsp | 88.19 | - | - | - | - | - | 600 | (reused) |"
    assert lines[4] == "| gmp | 50.00 | - | - | - | - | - | 600 | 41 (reused) |"


def test_every_demo_method_has_the_same_data_backbone_budget_and_selection_rule():
    configs = {name: load_config(name) for name in demo_configs([])}
    assert [c["name"] for c in configs.values()] == ["gap", "gem", "gmp", "gsp", "gsp-zsr"]
    shared = ("seed", "optimizer", "schedule", "evaluation", "trainer")
    first = configs["demo-gap"]
    assert first["model"]["backbone"] == {
        "name": "resnet20",
        "weights": "resnet20-digits",
        "frozen": True,
    }
    assert (
        first["data"]["dataset"]["name"] == "collage_shared"
        and first["schedule"]["plateau"]["patience"] == 5
    )
    for name, config in configs.items():
        assert all(config[key] == first[key] for key in shared), name
        assert (
            config["model"]["backbone"] == first["model"]["backbone"]
            and config["model"]["embedding_dim"] == 128
        )
        assert {k: v for k, v in config["data"].items() if k != "halves"} == {
            k: v for k, v in first["data"].items() if k != "halves"
        }
        base_loss = config["loss"]["base"] if config["loss"]["name"] == "zsr" else config["loss"]
        assert base_loss == first["loss"], name
    # the paper's Cifar Collage setting for GSP (m = 128, mu = 0.2, eps = 10, lambda = 0.5)
    gsp = configs["demo-gsp"]["model"]["pooling"]
    assert (gsp["num_prototypes"], gsp["mu"], gsp["eps"]) == (128, 0.2, 10.0)
    assert configs["demo-gsp-zsr"]["loss"]["mixing"] == 0.5


def test_missing_backbone_weights_are_pre_trained_before_any_run_is_timed(tmp_path, monkeypatch):
    from gspdml.training.pretrain import load_recipe, weights_path
    from gspdml.workflows import demo

    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))
    weights = weights_path(load_recipe("smoke-small_cnn-digits"))
    assert not weights.is_file()
    seen = []

    def timed_run(run, **kwargs):
        seen.append(weights.is_file())
        return run_planned(run, **kwargs)

    run_planned = demo.run_planned
    monkeypatch.setattr(demo, "run_planned", timed_run)
    overrides = [
        "trainer.progress=false",
        "data.dataset.images_per_class=4",
        "schedule.max_steps=2",
        "evaluation.every=2",
        "model.backbone={name: small_cnn, widths: [8, 16], weights: smoke-small_cnn-digits, frozen: true}",
    ]
    rows = demo.run_demo(["demo-gap", "demo-gmp"], tmp_path / "demo", overrides)
    assert seen == [True, True] and [row["method"] for row in rows] == ["gap", "gmp"]

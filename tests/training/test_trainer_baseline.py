"""Every run reports its baseline (practitioner issue 28): the step-0 model's test metrics in
``results.json`` and the console, and a warning when training made retrieval worse."""

import json

import yaml

from gspdml.config import load_config
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings
from gspdml.models.inference import split_embeddings
from gspdml.training import train
from gspdml.training.baseline import BackboneGap
from gspdml.training.parts import build_run


def test_results_hold_the_step0_baseline_of_a_freshly_built_model(tmp_path, make_config, capsys):
    config = load_config(make_config(schedule={"max_steps": 10}))
    results = train(config, tmp_path / "r")
    saved = json.loads((tmp_path / "r" / "results.json").read_text())
    assert saved["baseline"]["step0"].keys() == saved["test"].keys()
    assert "backbone_gap" not in saved["baseline"]  # small_cnn is not pretrained
    assert results["baseline"] == saved["baseline"]

    parts = build_run(config)  # the same seed builds the same step-0 weights
    embeddings = split_embeddings(
        parts.model, parts.data.test, batch_size=config.data.eval_batch_size
    )
    spec = EvalSpec.from_evaluation(config.evaluation)
    independent = evaluate_embeddings(*embeddings, spec=spec).metrics
    assert saved["baseline"]["step0"] == independent

    err = capsys.readouterr().err
    assert "gspdml: baseline: test map_at_r" in err
    assert "step0" in err


def test_a_run_that_training_made_worse_warns_with_both_numbers(tmp_path, make_config, capsys):
    destroyed = make_config(
        optimizer={"lr": 30.0},
        schedule={"max_steps": 6},
        evaluation={"every": 3, "patience": None, "restore_best": False},
    )
    results = train(load_config(destroyed), tmp_path / "bad")
    trained, step0 = results["test"]["map_at_r"], results["baseline"]["step0"]["map_at_r"]
    assert trained < step0
    err = capsys.readouterr().err
    assert (
        f"gspdml: warning: the trained model is worse than the step0 baseline: "
        f"test map_at_r {trained:.4f} < {step0:.4f}" in err
    )


def test_a_run_better_than_its_baseline_does_not_warn(tmp_path, make_config, capsys):
    results = train(load_config(make_config(schedule={"max_steps": 30})), tmp_path / "good")
    assert results["test"]["map_at_r"] > results["baseline"]["step0"]["map_at_r"]
    assert "warning: the trained model is worse" not in capsys.readouterr().err


def test_the_baseline_can_be_turned_off(tmp_path, make_config):
    off = make_config(schedule={"max_steps": 5}, evaluation={"baseline": False})
    assert "baseline" not in train(load_config(off), tmp_path / "off")


def test_a_pretrained_backbone_reports_its_own_pooled_features(tmp_path, make_config):
    recipe = tmp_path / "tiny_recipe.yaml"
    recipe.write_text(
        yaml.safe_dump(
            {
                "backbone": {"name": "small_cnn", "widths": [4, 8]},
                "data": {"source": "digits", "tiles_per_class": 1},
                "train": {"epochs": 1, "batch_size": 50, "precision": "fp32"},
            }
        )
    )
    backbone = {"name": "small_cnn", "widths": [4, 8], "weights": str(recipe)}
    config = load_config(make_config(model={"backbone": backbone}, schedule={"max_steps": 5}))
    results = train(config, tmp_path / "r")
    assert results["baseline"]["backbone_gap"].keys() == results["test"].keys()

    parts = build_run(config)  # the pretrained backbone as the run starts from it
    gap = BackboneGap(parts.model.backbone)
    embeddings = split_embeddings(gap, parts.data.test, batch_size=config.data.eval_batch_size)
    spec = EvalSpec.from_evaluation(config.evaluation)
    assert (
        results["baseline"]["backbone_gap"] == evaluate_embeddings(*embeddings, spec=spec).metrics
    )

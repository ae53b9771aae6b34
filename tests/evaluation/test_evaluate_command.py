"""``gspdml evaluate RUN`` reproduces the test metrics the trainer wrote to ``results.json``:
the same flat schema, the run's precision and device, the same post-processing."""

import json

import pytest

from gspdml.config import load_config
from gspdml.training import train
from tests.helpers.retrieval import run_cli


def tiny_run(tmp_path, **evaluation):
    """A run on a small digits collage that trains in a few seconds; returns its directory."""
    config = load_config(
        {
            "name": "tiny",
            "output_dir": str(tmp_path / "runs"),
            "seed": 3,
            "data": {
                "dataset": {
                    "name": "collage_digits",
                    "images_per_class": 8,
                    "class_split": [12, 6, 6],
                },
                "classes_per_batch": 4,
                "samples_per_class": 4,
                "eval_batch_size": 16,
            },
            "model": {
                "backbone": {"name": "small_cnn", "widths": [8, 16, 16]},
                "embedding_dim": 16,
            },
            "loss": {"name": "c2", "neg_margin": 0.5},
            "optimizer": {"lr": 3e-3},
            "schedule": {"max_steps": 6},
            "evaluation": {"every": 3, "patience": None, **evaluation},
            "trainer": {"progress": False, "log_every": 1, "precision": "bf16"},
        }
    )
    train(config)
    return tmp_path / "runs" / "tiny"


def evaluate_command(capsys, run_dir, *options):
    capsys.readouterr()
    assert run_cli("evaluate", run_dir, "--no-progress", *options) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    "evaluation",
    [
        {},
        {"metric": "nmi_r1_hmean", "recall_at": [1, 3]},
        {
            "postprocess": [
                {"name": "pca_whiten", "dim": 8},
                "dba",
                "qe",
                {"name": "k_reciprocal", "k1": 4, "k2": 2, "shortlist": 12},
            ]
        },
    ],
    ids=["plain", "nmi-selection", "postprocessed"],
)
def test_evaluate_reproduces_the_results_json_test_metrics_exactly(tmp_path, capsys, evaluation):
    """A bf16 run (emulated on a CPU without bf16 units): the old command embedded in fp32,
    left NMI out and nested the post-processed metrics under "postprocessed", so every case
    failed before the evaluation service."""
    run_dir = tiny_run(tmp_path, **evaluation)
    results = json.loads((run_dir / "results.json").read_text())
    expected = results["test"]
    printed = evaluate_command(capsys, run_dir)
    assert {key: printed.pop(key) for key in ("run", "split", "weights")} == {
        "run": str(run_dir),
        "split": "test",
        "weights": "final",
    }
    # both say which metrics they computed, and it is the same list
    assert printed.pop("metrics") == results["test_metrics"]
    assert printed == expected
    assert list(printed) == list(expected)  # the same order, too


def test_evaluate_runs_on_the_run_device_unless_told(tmp_path, capsys, monkeypatch):
    """The device is the run's trainer.device unless --device names another (the old command
    always embedded on the CPU and had no --device)."""
    import torch

    from gspdml.workflows import evaluate_run

    run_dir = tiny_run(tmp_path)
    asked = []

    def spy(name):
        asked.append(name)
        return torch.device("cpu")

    monkeypatch.setattr(evaluate_run, "resolve_device", spy)
    evaluate_command(capsys, run_dir)
    evaluate_command(capsys, run_dir, "--device", "cuda:1")
    assert asked == ["auto", "cuda:1"]  # tiny_run keeps trainer.device's default, auto

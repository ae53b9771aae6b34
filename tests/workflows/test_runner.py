"""The one reuse rule of gspdml.workflows.runner, with a stand-in for training (the protocol,
demo and experiment tests exercise it with real runs)."""

import json

import pytest

import gspdml.training
from gspdml.config import dump_config, load_config
from gspdml.errors import ConfigError
from gspdml.training.run_dir import CHECKPOINT_FILE
from gspdml.workflows.runner import PlannedRun, existing_status, run_planned, seed_plan


@pytest.fixture
def calls(monkeypatch):
    """Every call of ``gspdml.training.train``: (run dir name, resume, allow_changes); the fake
    writes config.yaml, a checkpoint and results.json as a finished run does."""
    made = []

    def fake_train(config, run_dir, resume=False, allow_changes=False):
        made.append((run_dir.name, resume, allow_changes))
        (run_dir / CHECKPOINT_FILE).parent.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(dump_config(config))
        (run_dir / CHECKPOINT_FILE).write_bytes(b"")
        results = {"steps": config["schedule"]["max_steps"], "seed": config["seed"]}
        (run_dir / "results.json").write_text(json.dumps(results))
        return results

    monkeypatch.setattr(gspdml.training, "train", fake_train)
    return made


def test_finished_runs_are_reused_stopped_ones_resumed_others_trained(tmp_path, calls):
    config = load_config("scratch-gap", ["schedule.max_steps=3"])
    runs = seed_plan(
        config, [0, 1], lambda seed: tmp_path / f"seed{seed}", name=lambda seed: f"seed{seed}"
    )
    assert [(r.name, r.config["seed"]) for r in runs] == [("seed0", 0), ("seed1", 1)]
    first = [run_planned(run) for run in runs]
    assert [o.status for o in first] == ["trained", "trained"] and all(
        o.seconds is not None for o in first
    )
    again = [run_planned(run) for run in runs]
    assert [o.status for o in again] == ["done", "done"] and [o.seconds for o in again] == [
        None,
        None,
    ]
    assert [o.results for o in again] == [o.results for o in first] and len(calls) == 2
    (tmp_path / "seed1" / "results.json").unlink()  # stopped after its last checkpoint
    assert run_planned(runs[1]).status == "resumed" and calls[-1] == ("seed1", True, True)


def test_harmless_differences_reuse_and_others_refuse(tmp_path, calls):
    config = load_config("scratch-gap", ["schedule.max_steps=3"])
    run_planned(PlannedRun("a", config, tmp_path / "a"))
    quiet = load_config(
        "scratch-gap", ["schedule.max_steps=3", "trainer.progress=false", "description=other"]
    )
    assert existing_status(PlannedRun("a", quiet, tmp_path / "a")) == "done"
    longer = PlannedRun("a", load_config("scratch-gap", ["schedule.max_steps=5"]), tmp_path / "a")
    with pytest.raises(
        ConfigError,
        match=r"holds a run of another config \(differs in schedule.max_steps\); pass --fresh",
    ):
        run_planned(longer, hint="pass --fresh")
    assert run_planned(longer, fresh=True).status == "trained" and calls[-1] == ("a", False, False)
    assert json.loads((tmp_path / "a" / "results.json").read_text())["steps"] == 5


def test_before_training_runs_only_when_the_run_trains(tmp_path, calls):
    config = load_config("scratch-gap", ["schedule.max_steps=3"])
    seen = []
    run = PlannedRun("a", config, tmp_path / "a")
    run_planned(run, before_training=seen.append)
    run_planned(run, before_training=seen.append)
    assert seen == [run]

"""``gspdml tune``: Optuna TPE over the tuning protocol, stored in SQLite, resumable, the best
trial written as a config."""

from __future__ import annotations

import json

import optuna
import pytest
import yaml

from gspdml.cli import main
from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.workflows.tuning_search import read_space
from tests.workflows.test_eval_protocol_runner import tiny_config


def test_a_resumable_search_writes_its_best_trial_as_a_config(tmp_path, capsys):
    config = tiny_config(tmp_path, class_split=[10, 0, 4])  # 2 validation classes
    space = tmp_path / "space.yaml"
    space.write_text(
        yaml.safe_dump(
            {
                "loss.neg_margin": {"float": [0.2, 0.8]},
                "optimizer.lr": {"float": [1e-3, 1e-2], "log": True},
            }
        )
    )
    out = tmp_path / "search"
    argv = ["tune", str(config), "--space", str(space), "--seeds", "0", "--output-dir", str(out)]
    assert main([*argv, "--trials", "2"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["trials"] == 2 and (out / "search.db").is_file()
    # resumed: the study is loaded from SQLite and only the missing trial runs
    assert main([*argv, "--trials", "3", "trainer.progress=false"]) == 0
    result = json.loads(capsys.readouterr().out)
    study = optuna.load_study(study_name="tiny", storage=result["storage"])
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 3 and sorted(p.name for p in out.glob("trial*")) == [
        "trial0",
        "trial1",
        "trial2",
    ]
    best = max(complete, key=lambda t: t.value)
    assert result["best_value"] == best.value
    # each trial's value is the tuning protocol's mean validation MAP@R of its models
    protocol = json.loads((out / f"trial{best.number}" / "protocol.json").read_text())
    assert protocol["protocol"] == "tuning"
    assert protocol["summary"]["val"]["map_at_r"]["mean"] == best.value
    written = load_config(out / "best.yaml")
    assert written.loss["neg_margin"] == pytest.approx(best.params["loss.neg_margin"])
    assert written.optimizer.lr == pytest.approx(best.params["optimizer.lr"])


def test_a_space_entry_must_name_one_kind(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("loss.neg_margin: {float: [0.2]}\n")
    with pytest.raises(ConfigError, match=r"loss.neg_margin: float: expected \[low, high\]"):
        read_space(path)
    path.write_text("loss.neg_margin: {between: [0.2, 0.3]}\n")
    with pytest.raises(ConfigError, match="give exactly one of float, int, categorical"):
        read_space(path)

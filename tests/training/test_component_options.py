"""``components.json``: every component's resolved options, defaults included; a resume refuses
a changed default as it refuses a changed option."""

from __future__ import annotations

import json

import pytest

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.losses.contrastive import C2Contrastive
from gspdml.training import train
from gspdml.training.component_options import resolved_options


def test_resolved_options_hold_defaults_and_nested_losses():
    config = load_config("cub-fair-c2-gsp")
    options = resolved_options(config)
    assert options["model.pooling"]["name"] == "gsp"
    assert options["model.pooling"]["options"]["iters"] == 100  # a default the config leaves out
    base = options["loss"]["options"]["base"]
    assert base["name"] == "c2" and base["options"]["pos_margin"] == 0.0
    assert "embedding_dim" not in options["loss"]["options"]  # supplied by the builder


def test_a_resume_refuses_a_default_that_changed_since_the_run_started(
    make_config, tmp_path, monkeypatch
):
    config = load_config(make_config(schedule={"max_steps": 4}, evaluation={"every": 2}))
    run = tmp_path / "runs" / "tiny"
    train(config)
    written = json.loads((run / "components.json").read_text())
    assert written["loss"] == {
        "name": "c2",
        "options": {"pos_margin": 0.0, "neg_margin": 0.5, "reduction": "avg_nonzero"},
    }
    (run / "results.json").unlink()  # killed after its last checkpoint: resumable
    defaults = C2Contrastive.__init__.__defaults__
    monkeypatch.setattr(C2Contrastive.__init__, "__defaults__", (0.1, *defaults[1:]))
    with pytest.raises(ConfigError, match=r"--resume: .*loss\.pos_margin: 0\.0 -> 0\.1"):
        train(config, resume=True)
    monkeypatch.setattr(C2Contrastive.__init__, "__defaults__", defaults)
    assert train(config, resume=True)["steps"] == 4

"""The config diff of a resume, the components check of a resume and a tracker's parameters flatten
by one rule (``gspdml.dotted_keys``): an empty mapping is a value of its own, never dropped."""

from __future__ import annotations

import json

import pytest

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.training.component_options import COMPONENTS_FILE, check_same_options, write_options
from gspdml.training.config_changes import config_differences
from gspdml.training.trackers import config_params


def test_postprocess_as_an_empty_mapping_differs_from_none_at_all(make_config):
    config = load_config(make_config())
    absent = config.to_dict()
    del absent["evaluation"]["postprocess"]
    empty = config.to_dict()
    empty["evaluation"]["postprocess"] = {}
    assert config_differences(absent, empty) == {"evaluation.postprocess": ("<absent>", {})}
    assert config_differences(empty, absent) == {"evaluation.postprocess": ({}, "<absent>")}
    assert config_differences(empty, config) == {"evaluation.postprocess": ({}, [])}


def test_a_resume_refuses_a_recorded_option_that_was_an_empty_mapping(make_config, tmp_path):
    """The run recorded its loss with an option ``weights: {}`` that the loss no longer has: a
    difference named by its config key, not dropped."""
    config = load_config(make_config())
    write_options(tmp_path, config)
    check_same_options(tmp_path, config)  # the same options: no difference
    recorded = json.loads((tmp_path / COMPONENTS_FILE).read_text())
    recorded["loss"]["options"]["weights"] = {}
    (tmp_path / COMPONENTS_FILE).write_text(json.dumps(recorded))
    with pytest.raises(ConfigError, match=r"\(loss\.weights: \{\} -> '<absent>'\)"):
        check_same_options(tmp_path, config)


def test_a_trackers_parameters_hold_an_empty_mapping(make_config):
    """What MLflow's ``log_batch`` receives (``test_trackers.py`` reads it back from MLflow)."""
    params = config_params(load_config(make_config(data={"eval_transform": {}})))
    assert params["data.eval_transform"] == "{}"
    assert json.loads(params["loss.neg_margin"]) == 0.5
    assert json.loads(params["data.dataset.class_split"]) == [12, 6, 6]  # a list: one parameter

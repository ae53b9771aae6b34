"""A run's config is checked (its components' declared options, nothing built) once, however
many entries hand it on; a changed config, working directory or registry is checked again."""

from __future__ import annotations

import dataclasses

import pytest

import gspdml.config as config_module
from gspdml.config import load_config, validated
from gspdml.errors import ConfigError
from gspdml.pooling import POOLINGS
from gspdml.pooling.simple import GAP


@pytest.fixture()
def checks(monkeypatch):
    calls = []
    original = config_module.check_components

    def counted(config):
        calls.append(config)
        original(config)

    monkeypatch.setattr(config_module, "check_components", counted)
    monkeypatch.setattr(config_module, "_CHECKED", type(config_module._CHECKED)())
    return calls


def test_a_checked_config_is_not_checked_again(checks):
    config = load_config("demo-gsp", ["trainer.progress=false"])
    assert validated(validated(config)) is config
    assert validated(config.to_dict()) is config  # the YAML form of the same config
    assert len(checks) == 1
    changed = validated(dataclasses.replace(config, seed=config.seed + 1))
    assert changed.seed == config.seed + 1 and len(checks) == 2


def test_a_new_registration_or_directory_checks_again(checks, tmp_path, monkeypatch):
    config = load_config("demo-gsp", ["trainer.progress=false"])
    POOLINGS.register("checked_once_probe")(GAP)
    try:
        validated(config)
        assert len(checks) == 2
    finally:
        POOLINGS._entries.pop("checked_once_probe")
        POOLINGS._primary.pop("checked_once_probe")
    monkeypatch.chdir(tmp_path)
    validated(config)
    assert len(checks) == 3


def test_a_config_that_fails_is_never_remembered(checks):
    bad = {**load_config("demo-gsp").to_dict(), "model": {"pooling": {"name": "nope"}}}
    del checks[:]
    for _ in range(2):
        with pytest.raises(ConfigError, match="nope"):
            validated(bad)
    assert len(checks) == 2  # checked each time: a refused config is not remembered

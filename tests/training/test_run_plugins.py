"""``environment.json`` records, per run, the plugin modules the run depends on: those whose
registered components its config uses and those its ``plugins`` key names. Before, it recorded
every plugin module imported in the process (``gspdml.plugins._IMPORTED``, issue 40 #3): a run
that used none of a plugin's components recorded it, and a run that used a component of a module
its caller imported directly recorded nothing, so that ``load_run`` in a fresh process could not
build it."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from gspdml import plugins
from gspdml.config import load_config
from gspdml.losses import LOSSES
from gspdml.pooling import POOLINGS
from gspdml.training import train
from gspdml.training.run_dir import load_run
from gspdml.training.run_plugins import recorded_plugins
from tests.cli.test_cli_plugins import LOSS, POOLING
from tests.helpers.images import folder_config, image_folder

MODULE = "own_pool_plugin"


@pytest.fixture
def own_plugins(monkeypatch):
    """The process's plugin record and registries as they were, and the test's plugin modules
    forgotten, after the test (a later test of this process would otherwise see them)."""
    monkeypatch.setattr(plugins, "_IMPORTED", dict(plugins._IMPORTED))
    for registry in (POOLINGS, LOSSES):
        monkeypatch.setattr(registry, "_entries", dict(registry._entries))
        monkeypatch.setattr(registry, "_primary", dict(registry._primary))
    yield
    for name in [
        m for m in sys.modules if m.split(".")[0] in (MODULE, "own_package", "own_loss_plugin")
    ]:
        del sys.modules[name]


def _recorded(run_dir):
    return [r["module"] for r in json.loads((run_dir / "environment.json").read_text())["plugins"]]


def test_a_run_records_the_plugins_it_uses_and_reloads_them(tmp_path, monkeypatch, own_plugins):
    folder = tmp_path / "plugin"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(POOLING)
    monkeypatch.syspath_prepend(str(folder))
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    raw = folder_config(root, tmp_path / "runs")
    raw["trainer"] |= {"tensorboard": False}
    model = raw["model"]

    def run(name, **changes):
        train(load_config({**raw, "name": name, **changes}), tmp_path / "runs" / name)
        return tmp_path / "runs" / name

    # imported through a config's plugins key (process-wide): recorded by the run that asked
    asked = run("asked", plugins=[MODULE], model={**model, "pooling": "lt_attn"})
    assert _recorded(asked) == [MODULE]
    # a later run of the same process that uses none of its components: not recorded
    assert _recorded(run("plain", model={**model, "pooling": "gap"})) == []
    # one that uses its pooling without naming the module: recorded
    used = run("used", model={**model, "pooling": {"name": "lt_attn", "temperature": 0.5}})
    assert _recorded(used) == [MODULE]
    # a plugin's loss as the base loss of a library wrapper, in a list: its module is the run's
    (folder / "own_loss_plugin.py").write_text(LOSS)
    importlib.import_module("own_loss_plugin")
    wrapped = [{"name": "c2"}, {"name": "zsr", "base": "ep_margin", "weight": 0.5}]
    config = load_config({**raw, "loss": wrapped})
    assert [r["module"] for r in recorded_plugins(config)] == ["own_loss_plugin"]

    # a fresh process: the module and its components gone; load_run imports it again
    del sys.modules[MODULE], plugins._IMPORTED[MODULE]
    for name in POOLINGS.registered_from(MODULE):
        del POOLINGS._entries[name], POOLINGS._primary[name]
    assert "lt_attn" not in POOLINGS
    config, embedder = load_run(used)
    assert "lt_attn" in POOLINGS and MODULE in sys.modules
    assert type(embedder.pooling).__module__ == MODULE and embedder.pooling.temperature == 0.5
    assert config.model.pooling == {"name": "lt_attn", "temperature": 0.5}


def test_a_component_of_a_module_the_caller_imported_is_recorded_with_its_file(
    tmp_path, monkeypatch, own_plugins
):
    """A module imported by the caller's own code (``import my_pooling``), not through gspdml."""
    folder = tmp_path / "plugin"
    (folder / "own_package").mkdir(parents=True)
    (folder / "own_package" / "__init__.py").write_text("")
    (folder / "own_package" / "poolings.py").write_text(POOLING)
    monkeypatch.syspath_prepend(str(folder))
    importlib.import_module("own_package.poolings")
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    raw = folder_config(root, tmp_path / "runs")
    config = load_config({**raw, "model": {**raw["model"], "pooling": "lt_attn"}})
    train(config, tmp_path / "runs" / "own")
    (record,) = json.loads((tmp_path / "runs" / "own" / "environment.json").read_text())["plugins"]
    assert record["module"] == "own_package.poolings"
    assert record["file"] == str(folder / "own_package" / "poolings.py")
    assert record["sha256"].startswith("sha256:")

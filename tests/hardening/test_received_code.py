"""A received run folder or bundle never brings code of its own: the ``model.factory`` its weights
name and the plugin modules its ``environment.json`` records are never imported from inside it.

Before, a folder ``received/`` holding an ``evil.py`` beside weights whose metadata said
``model.factory: received.evil:make`` ran ``evil.py`` as soon as it was read from the directory
above (``python -c``, a notebook: the working directory is on ``sys.path``); the same through a
plugin module recorded in ``environment.json``. A plugin record that is not an object with a
module name (a string, a number, an object without ``module``) failed with a bare ``TypeError``
or ``KeyError``.
"""

import json

import pytest
import torch

from gspdml.config import dump_config, load_config
from gspdml.errors import ConfigError, DataError
from gspdml.models import build_embedder
from gspdml.training import load_run
from gspdml.training.checkpoint import save_state
from gspdml.training.run_dir import ENVIRONMENT_FILE, load_embedder

MODEL = {"backbone": {"name": "small_cnn", "widths": [4, 8]}, "embedding_dim": 8}
#: what the planted module does when it is imported: leave a file the test looks for
PLANTED = (
    "import pathlib\npathlib.Path({marker!r}).write_text('ran')\ndef make():\n    return None\n"
)


def _received_run(parent, name, factory=None):
    """``parent/name``: a run folder whose config and weights name ``factory``, as the trainer
    writes them (the config is read, never imported from, before the weights are loaded)."""
    config = load_config({"model": {**MODEL, "factory": factory}})
    run = parent / name
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(dump_config(config))
    torch.manual_seed(0)
    model = build_embedder({**config.model.to_dict(), "factory": None}, in_channels=3)
    recorded = config.model.to_dict()
    save_state(run / "model.safetensors", model.state_dict(), {"in_channels": 3, "model": recorded})
    return run, model


def _plant(folder, module, marker):
    (folder / f"{module}.py").write_text(PLANTED.format(marker=str(marker)))


def test_a_factory_module_inside_the_received_folder_is_never_imported(tmp_path, monkeypatch):
    run, _ = _received_run(tmp_path, "received_a", factory="received_a.evil:make")
    marker = tmp_path / "ran"
    _plant(run, "evil", marker)
    monkeypatch.syspath_prepend(str(tmp_path))  # the folder above on sys.path, as '' of python -c
    with pytest.raises(ConfigError, match=r"model\.factory: .*received_a\.evil.*inside the folder"):
        load_run(run)
    with pytest.raises(ConfigError, match=r"received_a\.evil.*inside the folder"):
        load_embedder(run / "model.safetensors")  # a bundle's folder is its weights' folder
    assert not marker.exists()


def test_a_factory_module_found_in_the_received_folder_itself_is_refused(tmp_path, monkeypatch):
    run, _ = _received_run(tmp_path, "received_b", factory="evil_b:make")
    marker = tmp_path / "ran"
    _plant(run, "evil_b", marker)
    monkeypatch.syspath_prepend(str(run))  # run from inside the folder
    with pytest.raises(ConfigError, match=r"evil_b.*inside the folder"):
        load_run(run)
    assert not marker.exists()


def test_a_plugin_recorded_by_a_received_run_is_never_imported_from_it(tmp_path, monkeypatch):
    run, _ = _received_run(tmp_path, "received_c")
    marker = tmp_path / "ran"
    _plant(run, "plugin_c", marker)
    record = {"plugins": [{"module": "received_c.plugin_c", "source": "config", "sha256": None}]}
    (run / ENVIRONMENT_FILE).write_text(json.dumps(record))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"plugins: .*environment\.json.*received_c\.plugin_c"):
        load_run(run)
    assert not marker.exists()


def test_a_factory_installed_outside_the_run_still_rebuilds_it(tmp_path, monkeypatch):
    run, model = _received_run(tmp_path / "runs", "mine", factory="my_factory_d:make")
    code = tmp_path / "code"
    code.mkdir()
    (code / "my_factory_d.py").write_text(
        "from gspdml.config import load_config\nfrom gspdml.models import build_embedder\n"
        f"def make():\n    return build_embedder(load_config({str(run / 'config.yaml')!r}).model"
        ".to_dict(), in_channels=3)\n"
    )
    monkeypatch.syspath_prepend(str(code))
    _, loaded = load_run(run)
    for name, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], value), name


@pytest.mark.parametrize(
    ("plugins", "named"),
    [
        ("abc", r'plugins is "abc", not a list'),
        ([5], r"plugins\[0\] is 5, not a plugin record"),
        ([{"module": "json"}, {"module": 5}], r'plugins\[1\] is \{"module": 5\}'),
        ([{"file": "x.py"}], r'plugins\[0\] is \{"file": "x\.py"\}'),
    ],
)
def test_a_damaged_plugin_record_is_refused_naming_the_entry(tmp_path, plugins, named):
    run, _ = _received_run(tmp_path, "received_e")
    (run / ENVIRONMENT_FILE).write_text(json.dumps({"plugins": plugins}))
    with pytest.raises(DataError, match=r"environment\.json: " + named):
        load_run(run)


def test_a_module_found_through_a_packages_extended_path_is_located_as_imported(
    tmp_path, monkeypatch
):
    """A package outside the folder whose ``__init__`` extends its ``__path__`` (as
    ``pkgutil.extend_path`` does) into the received folder: its submodule there is refused; the
    package is located first and imported only because it lies outside."""
    run, _ = _received_run(tmp_path, "received_f", factory="pkg_f.evil_f:make")
    marker = tmp_path / "ran"
    _plant(run, "evil_f", marker)
    (tmp_path / "code" / "pkg_f").mkdir(parents=True)
    (tmp_path / "code" / "pkg_f" / "__init__.py").write_text(f"__path__.append({str(run)!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path / "code"))
    with pytest.raises(
        ConfigError, match=r"pkg_f\.evil_f.*received_f/evil_f\.py, inside the folder"
    ):
        load_run(run)
    assert not marker.exists()

"""The run directory: the one place that knows its layout, and reading a run back.

The trainer writes, under ``RUN_DIR``:

* ``config.yaml`` (:data:`CONFIG_FILE`): the resolved config;
* ``data.json`` (:data:`DATA_FILE`): what the run trains on
  (:mod:`gspdml.training.data_fingerprint`), checked by ``--resume``;
* ``metrics.jsonl`` (:data:`METRICS_FILE`): one JSON object per line (train losses, validation rounds);
* ``timing.jsonl`` (:data:`TIMING_FILE`): step times (:mod:`gspdml.training.step_timing`);
* ``checkpoints/last.safetensors`` (:data:`CHECKPOINT_FILE`): everything ``--resume`` needs;
* ``checkpoints/best.safetensors`` (:data:`BEST_WEIGHTS_FILE`): the best weights so far;
* ``model.safetensors`` (:data:`WEIGHTS_FILE`): the final weights (the best ones when
  ``evaluation.restore_best``);
* ``results.json`` (:data:`RESULTS_FILE`): the final metrics;
* ``environment.json``: plugins, threads, CPU, precision (:mod:`gspdml.training.run_record`);
* ``tensorboard/`` (:data:`TENSORBOARD_DIR`), when enabled.

Weight files hold ``in_channels`` and the ``model`` section in their metadata, so
:func:`load_embedder` reads them without the config.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from gspdml.config import RunConfig
from gspdml.config.migration import read_run_config
from gspdml.data import DataSplits, build_data
from gspdml.errors import ConfigError, DataError, read_json_object
from gspdml.file_digest import file_sha256
from gspdml.models import Embedder, build_embedder
from gspdml.models.backbones import BACKBONES
from gspdml.output_files import json_text
from gspdml.plugins import SCRIPT, require_recorded
from gspdml.pooling.base import LazyInitialised
from gspdml.registry import parse_spec
from gspdml.settings.schema import plain
from gspdml.settings.sections import ModelConfig
from gspdml.training.checkpoint import CheckpointError, load_state, save_state
from gspdml.training.received_modules import refuse_module_inside
from gspdml.training.reload import factory_model
from gspdml.training.run_plugins import require_script_components
from gspdml.training.run_record import ENVIRONMENT_FILE, read_environment

#: backbone options that only choose initial weights, and their "none" value
INITIAL_WEIGHTS_OFF = {"weights": None, "pretrained": False}
CONFIG_FILE = "config.yaml"
DATA_FILE = "data.json"
METRICS_FILE = "metrics.jsonl"
TIMING_FILE = "timing.jsonl"
CHECKPOINT_FILE = "checkpoints/last.safetensors"
BEST_WEIGHTS_FILE = "checkpoints/best.safetensors"
WEIGHTS_FILE = "model.safetensors"
RESULTS_FILE = "results.json"
TENSORBOARD_DIR = "tensorboard"
#: the weights a run can be read back with: ``final`` (written at the end of training) or ``best``
WEIGHT_FILES = {"final": WEIGHTS_FILE, "best": BEST_WEIGHTS_FILE}


def save_weights(path: Path, model: nn.Module, in_channels: int, config: RunConfig) -> None:
    """Write ``model``'s weights with ``in_channels`` and ``config.model`` in the metadata."""
    save_state(path, model.state_dict(), {"in_channels": in_channels, "model": plain(config.model)})


def read_weights(
    path: Path, device: str | torch.device = "cpu"
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """``(state_dict, meta)`` with ``meta["in_channels"]`` and ``meta["model"]``, checked (a
    :class:`~gspdml.training.checkpoint.CheckpointError` names the file and the entry)."""
    state, meta = load_state(path, device)
    fix = "give the model.safetensors of a finished gspdml run"
    problem = None
    if not isinstance(state, dict):
        problem = f"it holds a {type(state).__name__}, not named tensors"
    else:
        for name, value in state.items():
            if not isinstance(name, str) or not isinstance(value, torch.Tensor):
                problem = f"entry {name!r} holds a {type(value).__name__}, not a tensor"
                break
    if problem is None and (
        not isinstance(meta.get("model"), dict) or type(meta.get("in_channels")) is not int
    ):
        problem = "its metadata lacks 'model' (an object) or 'in_channels' (an integer)"
    if problem is not None:
        raise CheckpointError(f"{path}: not a gspdml weights file ({problem}); {fix}")
    return state, meta


def load_embedder(
    path: Path, device: str | torch.device = "cpu", folder: Path | None = None
) -> tuple[Embedder, dict[str, Any]]:
    """The embedder a weights file describes, loaded (on ``device``, eval mode), and the file's
    metadata. It is built without the backbone's initial weights: loading never trains a recipe,
    downloads, reads a weight file the metadata names, or writes; a ``model.factory`` it names
    is never imported from inside ``folder`` (the received folder: a run or a bundle; default
    the file's own, :mod:`gspdml.training.received_modules`)."""
    state, meta = read_weights(path, device)
    try:
        section = ModelConfig.from_mapping(meta["model"], "model")
    except ConfigError as err:
        raise CheckpointError(f"{path}: its recorded model section is not valid ({err})") from None
    model: Embedder
    if section.factory:  # a user's model returns an EmbedderOutput, as an Embedder does
        module = str(section.factory).partition(":")[0]
        refuse_module_inside(module, folder or Path(path).parent, str(path), "model.factory")
        model = cast(Embedder, factory_model(section.factory))
        check_layout(path, model, state)
    else:
        spec, channels = without_initial_weights(section).to_dict(), int(meta["in_channels"])
        with torch.device("meta"):  # the layout the metadata claims, allocating nothing
            check_layout(path, build_embedder(spec, channels), state)
        model = build_embedder(spec, channels)
    model.load_state_dict(state)
    return model.to(device).eval(), meta


#: what a weights file's layout is checked against, and the fix, by default
DESCRIBED = (
    "the model its metadata describes",
    "the file was not written by gspdml or is damaged: use the run's own weights",
)


def check_layout(
    path: Path, skeleton: nn.Module, state: Mapping[str, Any], against: tuple[str, str] = DESCRIBED
) -> None:
    """Refuse weights whose names or shapes are not those of ``skeleton`` (``against``: what it
    is, and the fix), as a strict ``load_state_dict`` would, naming the file and the entry. A
    weights file's own model is laid out on the meta device before it is built: a file of a few
    bytes could otherwise claim a model of terabytes (``embedding_dim: 2**40``), allocated."""
    layout = {name: tuple(value.shape) for name, value in skeleton.state_dict().items()}
    stored = {name: tuple(value.shape) for name, value in state.items()}
    if layout == stored:
        return
    differ = sorted(set(layout) ^ set(stored)) or [n for n in layout if layout[n] != stored[n]]
    name, (what, fix) = differ[0], against
    raise CheckpointError(
        f"{path}: its weights are not those of {what} ({name}: {stored.get(name, 'absent')} "
        f"stored, {layout.get(name, 'absent')} expected; {len(differ)} entries differ); {fix}"
    )


def without_initial_weights(model: ModelConfig) -> ModelConfig:
    """The ``model`` section with the backbone's initial-weight options off."""
    name, options = parse_spec(model.backbone, "model.backbone")
    accepted = inspect.signature(BACKBONES.get(name, "model.backbone")).parameters
    options = {**options, **{k: v for k, v in INITIAL_WEIGHTS_OFF.items() if k in accepted}}
    return dataclasses.replace(model, backbone={"name": name, **options})


def load_run(
    run_dir: Path | str, weights: str = "final", device: str = "cpu"
) -> tuple[RunConfig, Embedder]:
    """The resolved config of a run and its embedder with the ``final`` or ``best`` weights
    loaded (eval mode; :data:`WEIGHT_FILES`)."""
    run_dir = Path(run_dir)
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise ConfigError("run_dir", f"{run_dir} is not a gspdml run directory (no {CONFIG_FILE})")
    if weights not in WEIGHT_FILES:
        raise ConfigError(
            "weights", f"unknown weights {weights!r}; allowed: {', '.join(WEIGHT_FILES)}"
        )
    path = run_dir / WEIGHT_FILES[weights]
    if not path.is_file():
        raise ConfigError(
            "weights", f"{path} does not exist (has the run finished? try weights='best')"
        )
    require_run_plugins(run_dir)
    if weights == "final":  # the weights results.json describes
        check_results_match(run_dir)
    config = read_run_config(config_path)
    model, meta = load_embedder(path, device, folder=run_dir)
    check_same_model(path, meta, config, config_path)
    uninitialised = [
        name
        for name, module in model.named_modules()
        if isinstance(module, LazyInitialised) and not module.is_initialised
    ]
    if uninitialised:
        raise ConfigError(
            "weights",
            f"{path}: {', '.join(uninitialised)} was saved before it was "
            "initialised (GSP: it pools as GAP); train the run again with "
            "this gspdml version, which initialises it before the first "
            "evaluation",
        )
    return config, model


def check_same_model(
    path: Path, meta: Mapping[str, Any], config: RunConfig, config_path: Path
) -> None:
    """Refuse weights (``meta``: their metadata) of another model than ``config`` (read from
    ``config_path``) describes: a folder that mixes two runs' files."""
    described = ModelConfig.from_mapping(meta["model"], "model")
    if without_initial_weights(described) != without_initial_weights(config.model):
        raise ConfigError(
            "weights",
            f"{path} holds the weights of another model than {config_path} describes (its "
            f"backbone {described.backbone_name!r}, pooling {described.pooling_name!r}, "
            f"embedding {described.embedding_dim}; the config's {config.model.backbone_name!r}, "
            f"{config.model.pooling_name!r}, {config.model.embedding_dim}); the folder mixes "
            "two runs' files",
        )


def require_run_plugins(run_dir: Path) -> None:
    """Import the plugin modules the run recorded (``environment.json``), never from inside the
    run folder, or name the missing one and what provided it; a module that changed since is
    noted on stderr. Components of a script (module ``__main__``) must be registered already
    (:mod:`gspdml.training.run_plugins`)."""
    record = read_environment(run_dir)
    if record is None:
        return
    where = str(Path(run_dir) / ENVIRONMENT_FILE)
    fix = "the file is damaged: restore it, or delete it and import the run's plugins yourself"
    plugins = record.get("plugins", [])
    if not isinstance(plugins, list):
        raise DataError(f"{where}: plugins is {json_text(plugins)[:80]}, not a list; {fix}")
    for position, plugin in enumerate(plugins):
        module = plugin.get("module") if isinstance(plugin, dict) else None
        if not isinstance(module, str) or not module:
            raise DataError(
                f"{where}: plugins[{position}] is {json_text(plugin)[:80]}, not a plugin record "
                f"with a module name; {fix}"
            )
        if module != SCRIPT:
            refuse_module_inside(module, run_dir, where, "plugins")
    for note in require_recorded(plugins, where):
        print(f"note: {run_dir}: {note}", file=sys.stderr)
    require_script_components(plugins, where)


def weights_digest(folder: str | Path) -> str:
    """``sha256:<hex>`` of ``FOLDER/model.safetensors`` (a run or a bundle)."""
    path = Path(folder) / WEIGHTS_FILE
    if not path.is_file():
        raise DataError(f"{path}: model weights not found")
    return file_sha256(path)


def build_run_data(config: RunConfig) -> DataSplits:
    """The splits of the run's dataset (``data.dataset``, seeded with the run's ``seed``)."""
    return build_data(config.data.dataset, seed=config.seed, field="data.dataset")


RESULTS_FIX = (
    "delete it and run the same command again (gspdml train: with --resume): the run's checkpoint "
    "is evaluated again and the file written anew"
)
DATA_RECORD_FIX = (
    "delete it (the run is then resumed without the data check and the file written anew), or "
    "pass --allow-data-change"
)


def read_results(
    run_dir: str | Path, required: Mapping[str, type | tuple[type, ...]] | None = None
) -> dict[str, Any] | None:
    """``RUN_DIR/results.json`` (None when absent), checked: an object whose ``test``, if any, is
    an object, with the fields ``required`` (name -> type); else a :class:`DataError`."""
    path = Path(run_dir) / RESULTS_FILE
    record = _read_record(path, RESULTS_FIX)
    if record is None:
        return None
    fields = {**({"test": dict} if "test" in record else {}), **(required or {})}
    for name, kind in fields.items():
        if name not in record:
            raise DataError(f"{path}: field {name!r} is missing; {RESULTS_FIX}")
        if not isinstance(record[name], kind) or isinstance(record[name], bool):
            raise DataError(
                f"{path}: field {name!r} is {json_text(record[name])[:80]}, not a "
                f"{_kind_name(kind)}; {RESULTS_FIX}"
            )
    return record


def read_data_record(run_dir: str | Path) -> dict[str, Any] | None:
    """``RUN_DIR/data.json`` (None when absent), checked: splits, each an object or null, whose
    ``class_names`` is a list of strings or null; else a :class:`DataError`."""
    path = Path(run_dir) / DATA_FILE
    record = _read_record(path, DATA_RECORD_FIX)
    if record is None:
        return None
    for split, value in record.items():
        names = value.get("class_names") if isinstance(value, dict) else None
        if value is not None and not isinstance(value, dict):
            problem = f"split {split!r} is {json_text(value)[:80]}, not an object"
        elif names is not None and not (
            isinstance(names, list) and all(isinstance(name, str) for name in names)
        ):
            problem = f"{split}.class_names is not a list of names"
        else:
            continue
        raise DataError(f"{path}: {problem}; {DATA_RECORD_FIX}")
    return record


def _read_record(path: Path, fix: str) -> dict[str, Any] | None:
    """The JSON object at ``path`` (None when absent); a damaged one's DataError says ``fix``."""
    if not path.is_file():
        return None
    try:
        return read_json_object(path)
    except DataError as err:
        raise DataError(f"{err}; {fix}") from None


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {dict: "JSON object", int: "whole number", float: "number", str: "string", list: "list"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def check_results_match(run_dir: Path) -> None:
    """Refuse a run folder whose ``results.json`` is a protocol's table, or records weights or a
    config other than those on disk."""
    path = Path(run_dir) / RESULTS_FILE
    results = _read_record(path, RESULTS_FIX)
    if results is None:
        return
    if any(isinstance(v, dict) and "summary" in v for v in results.values()):
        raise ConfigError(
            "run_dir",
            f"{path} is not this run's results but a table of methods (a protocol's); the "
            "folder mixes two runs' files, train the run again elsewhere",
        )
    for key, name in (("weights_sha256", WEIGHTS_FILE), ("config_sha256", CONFIG_FILE)):
        recorded = results.get(key)
        if recorded is not None and not isinstance(recorded, str):
            raise DataError(
                f"{path}: field {key!r} is {json_text(recorded)[:80]}, not a sha256; {RESULTS_FIX}"
            )
        if recorded is not None and file_sha256(Path(run_dir) / name) != recorded:
            raise ConfigError(
                "run_dir",
                f"{Path(run_dir) / name} is not the {name.split('.')[0]} that {path} describes "
                f"({key} {recorded[:19]}...); the folder mixes two runs' files",
            )

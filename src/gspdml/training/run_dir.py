"""The run directory: the one place that knows its layout, and reading a run back.

The trainer writes, under ``RUN_DIR``:

* ``config.yaml`` (:data:`CONFIG_FILE`): the resolved config;
* ``data.json`` (:data:`DATA_FILE`): what the run trains on
  (:mod:`gspdml.training.data_fingerprint`), checked by ``--resume``;
* ``metrics.jsonl`` (:data:`METRICS_FILE`): one JSON object per line (train losses, validation rounds);
* ``checkpoints/last.safetensors`` (:data:`CHECKPOINT_FILE`): everything ``--resume`` needs;
* ``checkpoints/best.safetensors`` (:data:`BEST_WEIGHTS_FILE`): the best weights so far;
* ``model.safetensors`` (:data:`WEIGHTS_FILE`): the final weights (the best ones when
  ``evaluation.restore_best``);
* ``results.json`` (:data:`RESULTS_FILE`): the final metrics;
* ``environment.json`` (:data:`~gspdml.training.run_record.ENVIRONMENT_FILE`): the plugin
  modules, thread counts, CPU and precision of the run (:mod:`gspdml.training.run_record`);
* ``tensorboard/`` (:data:`TENSORBOARD_DIR`), when enabled.

Weight files are :func:`gspdml.training.checkpoint.save_state` files whose metadata holds what
rebuilds the embedder (``in_channels`` and the ``model`` section of the config), so
:func:`load_embedder` reads a run's weights, and a bundle's copy of them, without the config.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from pathlib import Path
from typing import Any, Mapping, cast

from torch import nn

from gspdml.config import RunConfig
from gspdml.config.migration import read_run_config
from gspdml.config.schema import plain
from gspdml.data import DataSplits, build_data
from gspdml.errors import ConfigError, DataError
from gspdml.models import Embedder, build_embedder
from gspdml.models.backbones import BACKBONES
from gspdml.plugins import require_recorded
from gspdml.pooling.base import LazyInitialised
from gspdml.registry import parse_spec
from gspdml.training.checkpoint import load_state, save_state
from gspdml.training.reload import factory_model
from gspdml.training.run_record import ENVIRONMENT_FILE, read_environment

#: backbone options that only choose initial weights, and their "none" value
INITIAL_WEIGHTS_OFF = {"weights": None, "pretrained": False}
CONFIG_FILE = "config.yaml"
DATA_FILE = "data.json"
METRICS_FILE = "metrics.jsonl"
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


def read_weights(path: Path, device="cpu") -> tuple[dict, dict[str, Any]]:
    """``(state_dict, meta)`` with ``meta["in_channels"]`` and ``meta["model"]`` (the model config)."""
    return load_state(path, device)


def load_embedder(path: Path, device="cpu") -> tuple[Embedder, dict[str, Any]]:
    """The embedder a weights file describes, with its weights loaded (on ``device``, eval mode),
    and the file's metadata.

    The file holds every parameter and buffer, so the embedder is built without the backbone's
    initial weights (``weights``: a pre-training recipe or file; ``pretrained``): loading a
    received run or bundle never trains a recipe, downloads or reads a weight file the metadata
    names, or writes anywhere."""
    state, meta = read_weights(path, device)
    factory = meta["model"].get("factory")
    model: Embedder
    if factory:  # a model of the user's, used as an Embedder is: it returns an EmbedderOutput
        model = cast(Embedder, factory_model(str(factory)))
    else:
        model = build_embedder(without_initial_weights(meta["model"]), int(meta["in_channels"]))
    model.load_state_dict(state)
    return model.to(device).eval(), meta


def without_initial_weights(model: Mapping[str, Any]) -> dict[str, Any]:
    """The ``model`` section with the backbone's initial-weight options off."""
    name, options = parse_spec(model["backbone"], "model.backbone")
    accepted = inspect.signature(BACKBONES.get(name, "model.backbone")).parameters
    options = {**options, **{k: v for k, v in INITIAL_WEIGHTS_OFF.items() if k in accepted}}
    return {**model, "backbone": {"name": name, **options}}


def load_run(
    run_dir: Path | str, weights: str = "final", device: str = "cpu"
) -> tuple[RunConfig, Embedder]:
    """The resolved config of a run and its embedder with the chosen weights loaded (eval mode).

    ``weights``: ``final`` (``model.safetensors``, written at the end of training: the best
    weights when ``evaluation.restore_best``) or ``best`` (the best so far, also mid-training).
    """
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
        from gspdml.training.run_identity import check_results_match  # it reads this layout

        check_results_match(run_dir)
    config = read_run_config(config_path)
    model, _ = load_embedder(path, device)
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


def require_run_plugins(run_dir: Path) -> None:
    """Import the plugin modules the run recorded (``environment.json``), or name the missing
    one and what provided it; a module that changed since is noted on stderr."""
    record = read_environment(run_dir)
    if record is None:
        return
    where = str(Path(run_dir) / ENVIRONMENT_FILE)
    for note in require_recorded(record.get("plugins", []), where):
        print(f"note: {run_dir}: {note}", file=sys.stderr)


def weights_digest(folder: str | Path) -> str:
    """``sha256:<hex>`` of ``FOLDER/model.safetensors`` (a run or a bundle); indexes record it to
    detect a model change."""
    path = Path(folder) / WEIGHTS_FILE
    if not path.is_file():
        raise DataError(f"{path}: model weights not found")
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def build_run_data(config: dict[str, Any]) -> DataSplits:
    """The splits of the run's dataset (``data.dataset``, seeded with the run's ``seed``)."""
    data = config.get("data") or {}
    if "dataset" not in data:
        raise ConfigError("data.dataset", "the run config names no dataset")
    return build_data(data["dataset"], seed=int(config.get("seed", 0)), field="data.dataset")

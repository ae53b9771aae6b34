"""Read a finished run directory: its resolved config and its embedder weights.

A run directory (written by the trainer) holds ``config.yaml`` (resolved config) and
``model.safetensors`` (the embedder's state dict). Nothing here unpickles: the config is read
with ``yaml.safe_load`` and the weights with safetensors.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch
import yaml
from safetensors.torch import load_file

from gspdml.data import DataSplits, build_data
from gspdml.errors import ConfigError, DataError
from gspdml.models import Embedder, build_embedder

CONFIG_FILE = "config.yaml"
WEIGHTS_FILE = "model.safetensors"


def read_run_config(run_dir: str | Path) -> dict[str, Any]:
    """The resolved config of a run (``RUN_DIR/config.yaml``)."""
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise DataError(f"{path}: run config not found (is {run_dir} a gspdml run directory?)")
    with open(path, encoding="utf-8") as handle:
        config = yaml.safe_load(handle)
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        raise DataError(f"{path}: expected a mapping with a 'model' section")
    return config


def weights_digest(run_dir: str | Path) -> str:
    """``sha256:<hex>`` of ``RUN_DIR/model.safetensors``; indexes record it to detect a model change."""
    path = Path(run_dir) / WEIGHTS_FILE
    if not path.is_file():
        raise DataError(f"{path}: model weights not found")
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _image_channels(config: dict[str, Any], state: dict[str, torch.Tensor]) -> int:
    """Image channels of the backbone's first layer.

    The config names them when it can (``model.in_channels`` or ``data.channels``); otherwise
    they are read from the weights: building the embedder for one channel and comparing shapes,
    the first 4-D tensor whose input width differs is the first convolution.
    """
    for section, key in (("model", "in_channels"), ("data", "channels")):
        value = (config.get(section) or {}).get(key)
        if value is not None:
            return int(value)
    probe = build_embedder(config["model"], in_channels=1).state_dict()
    for name, tensor in probe.items():
        stored = state.get(name)
        if stored is not None and tensor.dim() == 4 and tuple(stored.shape) != tuple(tensor.shape):
            return int(stored.shape[1])
    return 1


def load_run(run_dir: str | Path) -> tuple[dict[str, Any], Embedder]:
    """``(config, embedder)`` of a run, in eval mode on the CPU.

    Stands in for ``gspdml.training.load_run`` (same signature) until that one is on main.
    """
    config = read_run_config(run_dir)
    weights = Path(run_dir) / WEIGHTS_FILE
    if not weights.is_file():
        raise DataError(f"{weights}: model weights not found")
    state = load_file(str(weights), device="cpu")
    model = build_embedder(config["model"], in_channels=_image_channels(config, state))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise DataError(f"{weights}: weights do not match the model in {Path(run_dir) / CONFIG_FILE}: {err}") from None
    return config, model.eval()


def build_run_data(config: dict[str, Any]) -> DataSplits:
    """The splits of the run's dataset (``data.dataset``, seeded with the run's ``seed``)."""
    data = config.get("data") or {}
    if "dataset" not in data:
        raise ConfigError("data.dataset", "the run config names no dataset")
    return build_data(data["dataset"], seed=int(config.get("seed", 0)), field="data.dataset")

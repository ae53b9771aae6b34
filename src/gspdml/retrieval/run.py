"""What retrieval needs from a run directory beyond ``gspdml.training.load_run``: a fingerprint
of its weights, and its dataset."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from gspdml.data import DataSplits, build_data
from gspdml.errors import ConfigError, DataError

WEIGHTS_FILE = "model.safetensors"


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


def build_run_data(config: dict[str, Any]) -> DataSplits:
    """The splits of the run's dataset (``data.dataset``, seeded with the run's ``seed``)."""
    data = config.get("data") or {}
    if "dataset" not in data:
        raise ConfigError("data.dataset", "the run config names no dataset")
    return build_data(data["dataset"], seed=int(config.get("seed", 0)), field="data.dataset")

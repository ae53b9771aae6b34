"""Model weights as safetensors, with what is needed to rebuild the embedder in the metadata."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from torch import nn

from gspdml.training.checkpoint import load_state, save_state


def save_weights(path: Path, model: nn.Module, in_channels: int, config: Mapping[str, Any]) -> None:
    save_state(path, model.state_dict(), {"in_channels": in_channels, "model": dict(config["model"])})


def load_weights(path: Path, device="cpu") -> tuple[dict, dict[str, Any]]:
    """``(state_dict, meta)`` with ``meta["in_channels"]`` and ``meta["model"]`` (the model config)."""
    return load_state(path, device)

"""Reading a finished (or running) run directory back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gspdml.errors import ConfigError
from gspdml.models import Embedder, build_embedder
from gspdml.training.weights import load_weights

WEIGHT_FILES = {"final": "model.safetensors", "best": "checkpoints/best.safetensors"}


def load_run(run_dir: Path | str, weights: str = "final", device: str = "cpu") -> tuple[dict[str, Any], Embedder]:
    """The resolved config of a run and its embedder with the chosen weights loaded (eval mode).

    ``weights``: ``final`` (``model.safetensors``, written at the end of training: the best
    weights when ``evaluation.restore_best``) or ``best`` (the best so far, also mid-training).
    """
    run_dir = Path(run_dir)
    config_path = run_dir / "config.yaml"
    if not config_path.is_file():
        raise ConfigError("run_dir", f"{run_dir} is not a gspdml run directory (no config.yaml)")
    if weights not in WEIGHT_FILES:
        raise ConfigError("weights", f"unknown weights {weights!r}; allowed: {', '.join(WEIGHT_FILES)}")
    path = run_dir / WEIGHT_FILES[weights]
    if not path.is_file():
        raise ConfigError("weights", f"{path} does not exist (has the run finished? try weights='best')")
    config = yaml.safe_load(config_path.read_text())
    state, meta = load_weights(path, device)
    model = build_embedder(meta["model"], int(meta["in_channels"]))
    model.load_state_dict(state)
    uninitialised = [name for name, module in model.named_modules() if getattr(module, "is_initialised", True) is False]
    if uninitialised:
        raise ConfigError("weights", f"{path}: {', '.join(uninitialised)} was saved before its prototypes were initialised "
                                     "(it pools as GAP); train the run again with this gspdml version, which initialises "
                                     "them before the first evaluation")
    return config, model.to(device).eval()

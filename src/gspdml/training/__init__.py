"""Training: the loop, optimiser groups, checkpoints, backbone pre-training recipes, and the run directory."""

from gspdml.training.callbacks import Callback
from gspdml.training.run_dir import load_run
from gspdml.training.trainer import Trainer, train

__all__ = ["Callback", "Trainer", "load_run", "train"]

"""Training: the loop, optimiser groups, checkpoints, and reading runs back."""

from gspdml.training.callbacks import Callback
from gspdml.training.run import load_run
from gspdml.training.trainer import Trainer, train

__all__ = ["Callback", "Trainer", "load_run", "train"]

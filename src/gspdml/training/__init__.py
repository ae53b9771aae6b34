"""Training: the loop, optimiser groups, checkpoints, and reading runs back."""

from gspdml.training.callbacks import Callback
from gspdml.training.inference import embed, evaluate_split
from gspdml.training.run import load_run
from gspdml.training.trainer import Trainer, train

__all__ = ["Callback", "Trainer", "embed", "evaluate_split", "load_run", "train"]

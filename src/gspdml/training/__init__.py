"""Training: the parts of a run, the loop, optimiser groups, checkpoints, backbone pre-training
recipes, and the run directory."""

from gspdml.training.callbacks import Callback
from gspdml.training.parts import RunParts, TensorEmbedder, build_run
from gspdml.training.run_dir import load_run
from gspdml.training.trainer import Trainer, train

__all__ = ["Callback", "RunParts", "TensorEmbedder", "Trainer", "build_run", "load_run", "train"]

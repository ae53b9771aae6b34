"""The parts of a run, built from a config or given by the user, before any training.

:func:`build_run` turns a resolved config into :class:`RunParts`;
:class:`~gspdml.training.trainer.Trainer` trains any parts: a user's ``nn.Module`` embedder (a
tensor-returning one wrapped in :class:`TensorEmbedder`), a registered or user loss and any
``(image, label)`` dataset (:class:`~gspdml.data.seeded.SeededTransformDataset`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
from torch import nn

from gspdml.config import RunConfig
from gspdml.data import DataSplits, build_data
from gspdml.errors import ConfigError
from gspdml.losses import MetricLoss, as_metric_loss, build_loss
from gspdml.models import build_embedder
from gspdml.models.output import EmbedderOutput
from gspdml.training.callbacks import Callback
from gspdml.training.ccp_controller import CCPController
from gspdml.training.init_from import initialise_from_run
from gspdml.training.pretrain import resolve_recipe_weights
from gspdml.training.rng import seed_everything

#: the controllers a loss can declare (``MetricLoss.controller``), by name
CONTROLLERS = {"ccp": CCPController}


class TensorEmbedder(nn.Module):
    """A user embedder whose forward returns the embedding tensor ``[B, D]``, seen as one that
    returns an :class:`~gspdml.models.EmbedderOutput` (with the embedding only)."""

    def __init__(self, module: nn.Module):
        super().__init__()
        self.module = module

    def forward(self, images: torch.Tensor) -> EmbedderOutput:
        return EmbedderOutput(self.module(images))


@dataclass
class RunParts:
    """What a trainer trains and on what: ``model`` returns an
    :class:`~gspdml.models.EmbedderOutput`; ``loss`` becomes a :class:`~gspdml.losses.MetricLoss`;
    ``callbacks`` are the user's, by a stable name (their checkpoint key); ``notes`` are lines
    for the run's header."""

    model: nn.Module
    loss: nn.Module
    data: DataSplits
    callbacks: dict[str, Callback] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.loss = as_metric_loss(self.loss)


def build_run(config: RunConfig, *, resuming: bool = False) -> RunParts:
    """The parts a resolved config describes, seeded by ``config.seed`` after a recipe is
    pre-trained (so the run starts alike whether the weights were cached or not).
    ``resuming``: ``model.init_from`` is not read (the checkpoint holds the weights)."""
    model_section = resolve_recipe_weights(config.model, device=config.trainer.device)
    seed_everything(config.seed)
    data = build_data(config.data.dataset, seed=config.seed)
    model = build_embedder(model_section, data.channels)
    notes = []
    if config.model.init_from is not None and not resuming:
        notes.append(initialise_from_run(model, config.model.init_from, config.seed).describe())
    loss = build_loss(
        config.loss, "loss", embedding_dim=model.embedding_dim, num_classes=data.num_classes
    )
    return RunParts(model, loss, data, notes=notes)


def find_callbacks(
    model: nn.Module, loss: nn.Module, extra: Mapping[str, Callback]
) -> dict[str, Callback]:
    """Every callback of a run by a stable name: the modules of the model and the loss that are
    :class:`Callback` (``model.<module path>``, ``loss.<module path>``), the controller each loss
    module declares (``<controller>:loss.<module path>``), then ``extra``."""
    found: dict[str, Callback] = {}
    for prefix, part in (("model", model), ("loss", loss)):
        for name, module in part.named_modules(prefix=prefix):
            if isinstance(module, Callback) and all(module is not c for c in found.values()):
                found[name] = module
    for name, module in loss.named_modules(prefix="loss"):
        if isinstance(module, MetricLoss) and module.controller is not None:
            if module.controller not in CONTROLLERS:
                raise ConfigError(
                    "loss",
                    f"{name} declares the unknown controller {module.controller!r}; "
                    f"known: {', '.join(CONTROLLERS)}",
                )
            found[f"{module.controller}:{name}"] = CONTROLLERS[module.controller](module)
    for name, callback in extra.items():
        if name in found:
            raise ConfigError(
                "callbacks",
                f"two callbacks are named {name!r}; give the user callback another name",
            )
        found[name] = callback
    return found

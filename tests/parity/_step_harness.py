"""What the step-parity tests of Metrix, LIBC and SimPool share: a preset resolved with the
overrides of a test, gspdml's :class:`~gspdml.training.Trainer` built around in-memory batches
in float64, the comparison of two sets of parameters, and (Metrix, SimPool) the step loop that
takes both sides through the same batches, the authors' side in the Metrix release's loop.

The gspdml side runs the trainer's own step (``Trainer._train_step``: the loss's
``training_objective``, warm-up freezing, clipping, the optimiser and the step decay; its loss
read back with ``Trainer.last_loss``), fed the batches a test chooses, so both sides see the same images in the same order; the sampler, the
data loader and evaluation rounds are not part of a step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

from gspdml.config import DEFAULTS, RunConfig, validated
from gspdml.config.loading import merge, read_config
from gspdml.data.base import DataSplits, EvalSplit
from gspdml.data.seeded import SeededTransformDataset
from gspdml.losses.base import build_loss
from gspdml.models.embedder import build_embedder
from gspdml.settings.schema import plain
from gspdml.training.parts import RunParts
from gspdml.training.trainer import Trainer
from tests.parity.vendor.metrix import main_step

#: what every parity run sets besides the test's overrides: CPU, no ImageNet download, no
#: reader of a dataset on disk, no evaluation inside the few steps
RUN: dict[str, Any] = {
    "trainer": {"device": "cpu", "precision": "fp32", "progress": False, "tensorboard": False},
    "data": {"num_workers": 0},
    "evaluation": {"every": 1000, "patience": None, "restore_best": False},
}


def preset(name: str, overrides: Mapping[str, Any]) -> RunConfig:
    """The preset ``name`` with :data:`RUN` and ``overrides`` merged over it, checked."""
    config = read_config(name, DEFAULTS)
    merge(config, copy.deepcopy(RUN))
    merge(config, copy.deepcopy(dict(overrides)))
    return validated(config)


def trainer(
    config: RunConfig,
    images: torch.Tensor,
    labels: torch.Tensor,
    run_dir: Path,
    state: Mapping[str, torch.Tensor],
    loss_state: Mapping[str, torch.Tensor] | None = None,
    num_classes: int | None = None,
) -> Trainer:
    """gspdml's trainer of ``config`` in float64, its embedder started from ``state`` (every
    tensor of the embedder must be given) and its loss from ``loss_state`` (when given, every
    tensor of the loss), its training split ``images``/``labels`` (``num_classes``: the loss's
    classes, default the labels')."""
    model = build_embedder(plain(config.model), int(images.shape[1])).double()
    missing, unexpected = model.load_state_dict(dict(state), strict=False)
    if missing or unexpected:
        raise AssertionError(f"state does not fit the embedder: {missing=} {unexpected=}")
    num_classes = num_classes or int(labels.max()) + 1
    loss = build_loss(
        plain(config.loss), "loss", embedding_dim=model.embedding_dim, num_classes=num_classes
    ).double()
    if loss_state is not None:
        loss.load_state_dict(dict(loss_state))
    split = SeededTransformDataset(TensorDataset(images, labels))
    # the run's evaluation split, required by the Trainer but never scored in these steps: the
    # training images twice, so every query has another image of its class even where a test
    # trains on one image per class (the Trainer refuses a split with no query to score)
    twice = TensorDataset(torch.cat([images, images]), torch.cat([labels, labels]))
    data = DataSplits(train=split, test=EvalSplit(SeededTransformDataset(twice)))
    return Trainer(RunParts(model, loss, data), config, run_dir)


def max_difference(ours: Mapping[str, torch.Tensor], theirs: Mapping[str, torch.Tensor]) -> float:
    """Largest absolute difference over the tensors both name (same shapes), and that both do."""
    if set(ours) != set(theirs):
        raise AssertionError(f"different tensors: {sorted(set(ours) ^ set(theirs))}")
    return max(float((ours[k].double() - theirs[k].double()).abs().max()) for k in ours)


def parameters(module: nn.Module) -> dict[str, torch.Tensor]:
    """The trainable floating-point tensors of ``module`` (BatchNorm affine included, whether it
    is a parameter or, frozen, a buffer; running statistics too), as they are now: not copies,
    so read them before the next step."""
    return {k: v.detach() for k, v in module.state_dict().items() if torch.is_floating_point(v)}


def against_metrix_loop(
    ours: Trainer,
    args: Any,
    their_model: nn.Module,
    built: dict[str, Any],
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    rename: Callable[[dict], dict],
) -> tuple[float, float]:
    """Each of ``batches`` through the Metrix release's loop (``vendor/metrix/main_step.py``, one
    batch per epoch, so that its epoch-wise warm-up and ``StepLR`` act on steps) and through
    ``ours._train_step``; the largest parameter and loss differences after any step (the
    release's parameter names mapped to gspdml's by ``rename``)."""
    worst_param = worst_loss = 0.0
    for epoch, batch in enumerate(batches):
        their_losses = main_step.run_epoch(args, epoch, their_model, [batch], **built)
        built["scheduler"].step()
        ours._train_step(*batch)
        worst_loss = max(worst_loss, abs(ours.last_loss - float(their_losses[-1])))
        worst_param = max(
            worst_param,
            max_difference(parameters(ours.model), rename(parameters(their_model))),
        )
    return worst_param, worst_loss

"""The linear probe: a linear classifier trained on frozen features, its top-1 accuracy on held-out
features (Caron et al., "Emerging Properties in Self-Supervised Vision Transformers", ICCV 2021,
§4.1 and Appendix, ``eval_linear.py``; the probe of Psomas thesis §3.4.3, Table 3.3).

The classifier ``z = W f + b`` (``W`` drawn from N(0, 0.01²), ``b = 0``, as DINO initialises it)
minimises the mean cross-entropy ``-log softmax(z)_y`` over the training features by SGD with
momentum, mini-batches in a seeded random order each epoch and a cosine learning rate over the
epochs, from ``lr`` to 0 (DINO: momentum 0.9, no weight decay, 100 epochs, ``lr = 0.001 ·
batch / 256``). DINO trains its probe on features of augmented crops (random resized crops and
flips, recomputed every epoch); here the features are computed once from the evaluation crop,
so the probe is the convex problem of one fixed feature set.

Labels are ints or strings in any numbering (negative, sparse, 64-bit ids): they pass through
the one label coding of the classifiers (:func:`gspdml.evaluation.top1.classifier_codes`), and
the probe has one output per distinct training label, in the labels' order; a test label no
training image has is never predicted, so its images count as wrong.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import ConfigError
from gspdml.evaluation.results import UNKNOWN, LabelsLike
from gspdml.evaluation.top1 import classifier_codes, fraction_correct


@dataclass(frozen=True)
class ProbeSettings:
    """How the probe trains (module doc); the defaults are DINO's at a batch of 1024."""

    epochs: int = 100
    batch_size: int = 1024
    lr: float = 0.001 * 1024 / 256
    momentum: float = 0.9
    weight_decay: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size"):
            if getattr(self, name) < 1:
                raise ConfigError(f"probe_{name}", f"must be at least 1, got {getattr(self, name)}")
        if not self.lr > 0:
            raise ConfigError("probe_lr", f"must be positive, got {self.lr}")


def train_linear_probe(
    features: torch.Tensor,
    labels: torch.Tensor,
    num_classes: int,
    settings: ProbeSettings = ProbeSettings(),
) -> nn.Linear:
    """A linear classifier of ``features`` ``[N, D]`` into ``num_classes`` (module doc), trained
    on the features' device in their float dtype; ``labels`` are class indices ``0 ..
    num_classes - 1`` (:func:`linear_probe_top1` takes labels in any numbering)."""
    if len(labels) and not 0 <= int(labels.min()) <= int(labels.max()) < num_classes:
        raise ConfigError(
            "labels",
            f"class indices must lie in 0..{num_classes - 1}, got {int(labels.min())}.."
            f"{int(labels.max())}; give class indices, or use linear_probe_top1, which takes "
            "labels in any numbering",
        )
    generator = torch.Generator().manual_seed(settings.seed)
    probe = nn.Linear(features.shape[1], num_classes).to(features.device, features.dtype)
    with torch.no_grad():
        probe.weight.copy_(torch.randn(probe.weight.shape, generator=generator) * 0.01)
        probe.bias.zero_()
    optimizer = torch.optim.SGD(
        probe.parameters(),
        lr=settings.lr,
        momentum=settings.momentum,
        weight_decay=settings.weight_decay,
    )
    targets = labels.to(features.device, torch.int64)
    for epoch in range(settings.epochs):
        for group in optimizer.param_groups:  # cosine from lr (epoch 0) towards 0
            group["lr"] = settings.lr * 0.5 * (1 + math.cos(math.pi * epoch / settings.epochs))
        order = torch.randperm(len(targets), generator=generator).to(features.device)
        for batch in order.split(settings.batch_size):
            loss = F.cross_entropy(probe(features[batch]), targets[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return probe.requires_grad_(False)


@torch.no_grad()
def top1(classifier: nn.Module, features: torch.Tensor, labels: torch.Tensor) -> float:
    """The fraction of ``features`` whose largest logit is their label (the first of equal
    logits wins); no features are refused (:func:`~gspdml.evaluation.top1.fraction_correct`)."""
    predicted = classifier(features).argmax(dim=1)
    correct = int((predicted == labels.to(predicted.device, torch.int64)).sum())
    return fraction_correct(correct, len(predicted), "the test features' split")


def linear_probe_top1(
    train_features: torch.Tensor,
    train_labels: LabelsLike,
    test_features: torch.Tensor,
    test_labels: LabelsLike,
    settings: ProbeSettings = ProbeSettings(),
) -> float:
    """Top-1 on the test features of the probe trained on the training features, one output per
    distinct training label (module doc)."""
    values, train_codes, test_codes = classifier_codes(train_labels, test_labels)
    for features, codes, name in (
        (train_features, train_codes, "train"),
        (test_features, test_codes, "test"),
    ):
        if features.shape[0] != len(codes):
            raise ValueError(f"{features.shape[0]} {name} features but {len(codes)} labels")
    if len(train_codes) == 0:
        raise ConfigError(
            "train_labels", "no training image, so the probe has no class to learn; give some"
        )
    classes, train_columns = torch.unique(train_codes, return_inverse=True)  # sorted: in order
    column_of_code = torch.full((len(values),), UNKNOWN, dtype=torch.int64)
    column_of_code[classes] = torch.arange(len(classes))
    probe = train_linear_probe(train_features, train_columns, len(classes), settings)
    test = test_features.to(train_features.device, train_features.dtype)
    return top1(probe, test, column_of_code[test_codes])

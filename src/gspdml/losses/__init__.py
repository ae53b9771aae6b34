"""Losses: ``loss(embeddings, labels, output=None) -> scalar``; registered in :data:`LOSSES`."""

from gspdml.losses.base import LOSSES, MetricLoss, WeightedSum, build_loss, check_loss
from gspdml.losses.pairs import PairLoss
from gspdml.losses import contrastive  # noqa: F401  (registers c1, c2)
from gspdml.losses import xml, zsr  # noqa: F401  (registers xml, zsr)

__all__ = ["LOSSES", "MetricLoss", "PairLoss", "WeightedSum", "build_loss", "check_loss"]

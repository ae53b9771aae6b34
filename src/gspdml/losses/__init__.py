"""Losses: ``loss(embeddings, labels, output=None) -> scalar``; registered in :data:`LOSSES`."""

from gspdml.losses.base import (LOSSES, MetricLoss, ModuleLoss, WeightedSum, as_metric_loss,
                                build_loss, check_loss)
from gspdml.losses.requirements import BatchRequirements
from gspdml.losses.pairs import PairLoss
from gspdml.losses.proxies import ProxyLoss
from gspdml.losses import contrastive  # noqa: F401  (registers c1, c2)
from gspdml.losses import margin, triplet, multi_similarity, lifted  # noqa: F401  (pair losses)
from gspdml.losses import proxy_nca, norm_softmax, proxy_anchor, soft_triple  # noqa: F401  (proxy losses)
from gspdml.losses import xbm  # noqa: F401  (cross-batch memory)
from gspdml.losses import ccp  # noqa: F401  (registers ccp)
from gspdml.losses import metrix  # noqa: F401  (registers metrix)
from gspdml.losses import xml, zsr  # noqa: F401  (registers xml, zsr)

__all__ = ["LOSSES", "BatchRequirements", "MetricLoss", "ModuleLoss", "PairLoss", "ProxyLoss",
           "WeightedSum", "as_metric_loss", "build_loss", "check_loss"]

"""Losses: ``loss(embeddings, labels, output=None) -> scalar``; registered in :data:`LOSSES`."""

from gspdml.losses import (  # noqa: F401  (each module registers its losses on import)
    ccp,
    contrastive,
    imix,
    libc,
    lifted,
    margin,
    metrix,
    mochi,
    multi_similarity,
    norm_softmax,
    proxy_anchor,
    proxy_nca,
    proxy_synthesis,
    soft_triple,
    triplet,
    xbm,
    xml,
    zsr,
)
from gspdml.losses.base import (
    LOSSES,
    MetricLoss,
    ModuleLoss,
    WeightedSum,
    as_metric_loss,
    build_loss,
    check_loss,
)
from gspdml.losses.pairs import PairLoss
from gspdml.losses.proxies import ProxyLoss
from gspdml.losses.requirements import BatchRequirements

__all__ = [
    "LOSSES",
    "BatchRequirements",
    "MetricLoss",
    "ModuleLoss",
    "PairLoss",
    "ProxyLoss",
    "WeightedSum",
    "as_metric_loss",
    "build_loss",
    "check_loss",
]

"""Losses: ``loss(embeddings, labels, output=None) -> scalar``; registered in :data:`LOSSES`."""

from gspdml.losses import (  # noqa: F401  (pair losses)  # noqa: F401  (proxy losses)  # noqa: F401  (registers xml, zsr)
    ccp,  # noqa: F401  (registers ccp)
    contrastive,  # noqa: F401  (registers c1, c2)
    imix,  # noqa: F401  (registers imix)
    libc,  # noqa: F401  (registers libc)
    lifted,
    margin,
    metrix,  # noqa: F401  (registers metrix)
    mochi,  # noqa: F401  (registers mochi)
    multi_similarity,
    norm_softmax,
    proxy_anchor,
    proxy_nca,
    proxy_synthesis,  # noqa: F401  (registers proxy_synthesis)
    soft_triple,
    triplet,
    xbm,  # noqa: F401  (cross-batch memory)
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

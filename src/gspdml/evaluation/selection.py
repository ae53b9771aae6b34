"""The metrics of a validation round and the number a run is selected by (``evaluation.metric``).

A round is scored by the evaluation service (:mod:`gspdml.evaluation.service`). The selection
metrics (:data:`SELECTION_METRICS`, those registered ``selectable``) are ``map_at_r``,
``precision_at_1``, ``r_precision`` (:mod:`gspdml.evaluation.metrics`) and ``nmi_r1_hmean``,

      H = 2 * NMI * R@1 / (NMI + R@1)   (0 when both are 0),

the validation score of the ProxyNCA++ release (Teh, DeVries & Taylor, ECCV 2020; code
``euwern/proxynca_pp``, ``train.py``: ``chmean = (2 * nmi * recall[0]) / (nmi + recall[0])``,
the best epoch being the one with the highest ``chmean``), with NMI that of k-means on the
split's query embeddings, one cluster per class (the paper's §4.1 definition,
:func:`gspdml.evaluation.clustering.clustering_scores`), and R@1 = P@1. A round runs k-means only
when the selection metric needs it (:func:`needs_clustering`).

The post-processed metrics are stored under :data:`POSTPROCESSED_PREFIX`
(``postprocessed_map_at_r``, ...); ``evaluation.select_postprocessed`` makes the selection read
them (:func:`selection_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gspdml.errors import ConfigError
from gspdml.evaluation.metric_registry import (
    METRICS,
    bounded_query_metrics,
    default_query_metrics,
)
from gspdml.evaluation.metrics import harmonic_mean

#: key prefix of the post-processed metrics of a round (``postprocessed_map_at_r``)
POSTPROCESSED_PREFIX = "postprocessed_"

__all__ = [
    "POSTPROCESSED_PREFIX",
    "check_selection_metric",
    "round_metrics",
    "harmonic_mean",
    "needs_clustering",
    "selection_key",
    "selection_metrics",
    "selection_value",
]


def selection_metrics() -> tuple[str, ...]:
    """The values of ``evaluation.metric``: the registered ``selectable`` metrics."""
    return tuple(name for name, metric in METRICS.items() if metric.selectable)


def round_metrics() -> tuple[str, ...]:
    """The per-query metrics of a validation round: the default ones, of bounded depth."""
    return tuple(name for name in default_query_metrics() if name in bounded_query_metrics())


def __getattr__(name: str) -> tuple[str, ...]:
    """``SELECTION_METRICS``, ``CLUSTERING_METRICS`` (those that need k-means) and
    ``ROUND_METRICS``, read from the registry when asked (a metric registered later is one)."""
    if name == "ROUND_METRICS":
        return round_metrics()
    if name == "SELECTION_METRICS":
        return selection_metrics()
    if name == "CLUSTERING_METRICS":
        return tuple(m for m in selection_metrics() if METRICS[m].needs_clustering)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def needs_clustering(metric: str) -> bool:
    """Whether selecting by ``metric`` needs NMI (k-means on the round's embeddings)."""
    return metric in METRICS and METRICS[metric].needs_clustering


def check_selection_metric(metric: Any, field: str = "evaluation.metric") -> None:
    """ConfigError naming ``field`` and the choices when ``metric`` is not a selection metric."""
    if metric not in selection_metrics():
        allowed = ", ".join(selection_metrics())
        raise ConfigError(field, f"unknown metric {metric!r}; allowed: {allowed}")


def selection_key(metric: str, postprocessed: bool = False) -> str:
    """The key of a round's metrics that selection reads."""
    return POSTPROCESSED_PREFIX + metric if postprocessed else metric


def selection_value(
    metrics: Mapping[str, float], metric: str, postprocessed: bool = False
) -> float:
    """The number a round is selected by: ``metric``, read after post-processing when
    ``postprocessed`` (``evaluation.select_postprocessed``)."""
    return float(metrics[selection_key(metric, postprocessed)])

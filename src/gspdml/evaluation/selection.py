"""The metrics of a validation round and the number a run is selected by (``evaluation.metric``).

A round scores the embeddings of the evaluation split with :func:`round_metrics`: the flattened
retrieval metrics of :func:`gspdml.evaluation.split_metrics.split_metrics`, plus what the
selection metric needs and the post-processed metrics when ``evaluation.postprocess`` is set.

Selection metrics (:data:`SELECTION_METRICS`):

- ``map_at_r``, ``precision_at_1``, ``r_precision``: :mod:`gspdml.evaluation.metrics`.
- ``nmi_r1_hmean``: the harmonic mean of NMI and R@1,

      H = 2 * NMI * R@1 / (NMI + R@1)   (0 when both are 0),

  the validation score of the ProxyNCA++ release (Teh, DeVries & Taylor, ECCV 2020; code
  ``euwern/proxynca_pp``, ``train.py``: ``chmean = (2 * nmi * recall[0]) / (nmi + recall[0])``,
  the best epoch being the one with the highest ``chmean``). NMI is that of k-means on the
  split's (query) embeddings with as many clusters as classes
  (:func:`gspdml.evaluation.clustering.clustering_scores`: NMI = 2 I(Y;C) / (H(Y) + H(C)), the
  ProxyNCA++ paper's §4.1 definition); R@1 is P@1 (the nearest neighbour has the query's label,
  leave-one-out on a validation split). k-means is much slower than the kNN metrics, so a round
  computes NMI only when the selection metric needs it (:func:`needs_clustering`).

Post-processed metrics (``evaluation.postprocess``) are the same flattened metrics after the
steps of :mod:`gspdml.evaluation.postprocess`, computed by
:func:`~gspdml.evaluation.postprocess.postprocessed_metrics` (the function the final evaluation
uses) and stored under :data:`POSTPROCESSED_PREFIX` (``postprocessed_map_at_r``, ...);
``evaluation.select_postprocessed`` makes the selection read them (:func:`selection_value`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from gspdml.errors import ConfigError

#: the values of ``evaluation.metric``
SELECTION_METRICS = ("map_at_r", "precision_at_1", "r_precision", "nmi_r1_hmean")
#: selection metrics that need k-means on the round's embeddings
CLUSTERING_METRICS = ("nmi_r1_hmean",)
#: key prefix of the post-processed metrics of a round (``postprocessed_map_at_r``)
POSTPROCESSED_PREFIX = "postprocessed_"


def harmonic_mean(a: float, b: float) -> float:
    """2ab / (a + b); 0 when a + b = 0 (both scores are 0)."""
    a, b = float(a), float(b)
    return 0.0 if a + b == 0 else 2.0 * a * b / (a + b)


def needs_clustering(metric: str) -> bool:
    """Whether selecting by ``metric`` needs NMI (k-means on the round's embeddings)."""
    return metric in CLUSTERING_METRICS


def check_selection_metric(metric: Any, field: str = "evaluation.metric") -> None:
    """ConfigError naming ``field`` and the choices when ``metric`` is not a selection metric."""
    if metric not in SELECTION_METRICS:
        raise ConfigError(field, f"unknown metric {metric!r}; allowed: {', '.join(SELECTION_METRICS)}")


def round_metrics(query, query_labels, gallery=None, gallery_labels=None, *, metric: str = "map_at_r",
                  recall_at: Iterable[int] = (1, 2, 4, 8), postprocess: Sequence[Any] = (), train=None) -> dict[str, float]:
    """Flattened metrics of one evaluation of the embeddings (leave-one-out when ``gallery`` is
    None): the retrieval metrics; ``nmi``, ``ami`` and ``nmi_r1_hmean`` when ``metric`` needs
    them (k-means with a fixed seed); the metrics after the ``postprocess`` steps under
    :data:`POSTPROCESSED_PREFIX` when there are steps (``train``: the training embeddings, for
    the steps that learn on them)."""
    from gspdml.evaluation.postprocess import postprocessed_metrics
    from gspdml.evaluation.split_metrics import split_metrics

    check_selection_metric(metric)
    recall_at = tuple(recall_at)
    metrics = split_metrics(query, query_labels, gallery, gallery_labels, recall_at=recall_at,
                            clustering=needs_clustering(metric))
    if needs_clustering(metric):
        metrics["nmi_r1_hmean"] = harmonic_mean(metrics["nmi"], metrics["precision_at_1"])
    if postprocess:
        after = postprocessed_metrics(query, query_labels, gallery, gallery_labels, steps=postprocess, train=train,
                                      recall_at=recall_at)
        metrics.update({POSTPROCESSED_PREFIX + key: value for key, value in after.items()})
    return metrics


def selection_key(metric: str, postprocessed: bool = False) -> str:
    """The key of :func:`round_metrics` that selection reads."""
    return POSTPROCESSED_PREFIX + metric if postprocessed else metric


def selection_value(metrics: Mapping[str, float], metric: str, postprocessed: bool = False) -> float:
    """The number a round is selected by: ``metric``, read after post-processing when
    ``postprocessed`` (``evaluation.select_postprocessed``)."""
    return float(metrics[selection_key(metric, postprocessed)])

"""Retrieval metrics of the fair (Musgrave) protocol, computed exactly from a kNN search.

Definitions (Gürbüz thesis §1.2; Musgrave et al.,
"A Metric Learning Reality Check", ECCV 2020, §3.2). For query i with label y_i, R_i is the number
of references labelled y_i (minus the query itself in leave-one-out mode) and rel_i(j) is 1 when
the j-th nearest reference (order: distance, then index) has label y_i:

- P@1 = rel_i(1) (the "R@1" of DML papers).
- R-precision = (1/R_i) sum_{j<=R_i} rel_i(j).
- MAP@R = (1/R_i) sum_{j<=R_i} rel_i(j) P_i(j), with P_i(j) = (1/j) sum_{l<=j} rel_i(l) (thesis
  misprint A2 resolved: precision at rank j).
- Recall@K = 1 if some j <= K has rel_i(j) = 1.
- mAP = (1/R_i) sum_{j<=k} rel_i(j) P_i(j) over the k = max_i R_i retrieved references; this is
  pytorch-metric-learning's ``mean_average_precision`` (divided by R_i, not by the hits).
- MRR = 1/(rank of the first relevant reference within those k), 0 if none.

Queries with R_i = 0 ("lone" queries: no other member of their class among the references) are
excluded from every mean and counted in ``num_lone_queries``; if every query is lone, the metrics
are NaN. The reported value is the mean over the remaining queries; the class-averaged variant is
the mean over classes of the per-class means. Per-query arithmetic is float64.

NMI and AMI cluster the query embeddings with k-means into as many clusters as there are query
labels (fixed seed) and compare with sklearn's ``normalized_mutual_info_score`` (arithmetic mean)
and ``adjusted_mutual_info_score``. Clustering is much slower than the kNN metrics, so it runs
only with ``clustering=True``; otherwise ``nmi`` and ``ami`` are None.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.clustering import clustering_scores
from gspdml.evaluation.exact_knn import DEFAULT_MEMORY_BUDGET, retrieve
from gspdml.evaluation.results import RetrievalResults

_PER_QUERY = ("map_at_r", "precision_at_1", "r_precision", "mean_average_precision", "mean_reciprocal_rank")


def retrieval_metrics(
    query,
    query_labels,
    reference=None,
    reference_labels=None,
    *,
    recall_at: Sequence[int] = (1, 2, 4, 8),
    clustering: bool = False,
    class_average: bool = False,
    per_class: bool = False,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: str = "torch",
    device=None,
    kmeans_backend: str = "sklearn",
    seed: int = 0,
) -> dict:
    """Exact retrieval metrics of ``query`` against ``reference`` (leave-one-out when None).

    Returns a dict with ``map_at_r``, ``precision_at_1``, ``r_precision``, ``recall_at_k``
    ({K: value}), ``mean_average_precision``, ``mean_reciprocal_rank``, ``nmi``, ``ami``,
    ``num_queries`` (queries scored), ``num_lone_queries`` (excluded) and ``k`` (neighbours
    searched). ``class_average=True`` adds ``class_averaged`` (same keys, mean of per-class means);
    ``per_class=True`` adds ``per_class`` ({label: {metric: value}}). See the module docstring for
    the definitions, :func:`gspdml.evaluation.exact_knn.knn` for the search and its tie rule.
    """
    recall_at = _check_recall_at(recall_at)
    results = retrieve(
        query, query_labels, reference, reference_labels,
        min_k=max(recall_at, default=1), memory_budget=memory_budget, backend=backend, device=device,
    )
    out = metrics_from_results(results, recall_at=recall_at, class_average=class_average, per_class=per_class)
    if clustering:
        out.update(clustering_scores(query, results.query_labels.numpy(), backend=kmeans_backend, seed=seed))
    return out


def metrics_from_results(
    results: RetrievalResults,
    *,
    recall_at: Sequence[int] = (1, 2, 4, 8),
    class_average: bool = False,
    per_class: bool = False,
) -> dict:
    """The kNN metrics of :func:`retrieval_metrics` from an existing search (no clustering):
    the kNN engine's :func:`~gspdml.evaluation.exact_knn.retrieve` or a search index's results, as long
    as every query and reference has a label."""
    recall_at = _check_recall_at(recall_at)
    if not results.fully_labelled:
        unknown = int((results.query_labels < 0).sum()), int((results.reference_labels < 0).sum())
        raise ConfigError("labels", f"metrics need every label; {unknown[0]} queries and {unknown[1]} references have none")
    if results.k < min(results.r_max, results.num_searchable):
        raise ConfigError("k", f"MAP@R needs k >= max R = {results.r_max}, search has k={results.k}")
    if recall_at and max(recall_at) > results.k and results.k < results.num_searchable:
        raise ConfigError("recall_at", f"Recall@{max(recall_at)} needs k >= {max(recall_at)}, search has k={results.k}")
    scores = per_query_scores(results, recall_at)
    keep = ~results.lone_queries
    labels = results.query_labels[keep]
    scores = {name: v[keep] for name, v in scores.items()}
    out = _reduce(scores, recall_at, lambda v: v.mean().item() if len(v) else float("nan"))
    out.update(nmi=None, ami=None, num_queries=int(keep.sum()), num_lone_queries=int((~keep).sum()), k=results.k)
    if class_average or per_class:
        classes, inverse = torch.unique(labels, return_inverse=True)
        counts = torch.bincount(inverse, minlength=len(classes)).double()
        by_class = {
            name: torch.zeros(len(classes), dtype=torch.float64).index_add_(0, inverse, v) / counts
            for name, v in scores.items()
        }
        if class_average:
            out["class_averaged"] = _reduce(by_class, recall_at, lambda v: v.mean().item() if len(v) else float("nan"))
        if per_class:
            values = results.label_values[classes.numpy()]
            out["per_class"] = {
                _plain(value): _reduce(by_class, recall_at, lambda v, c=c: v[c].item())
                for c, value in enumerate(values)
            }
    return out


def per_query_scores(results: RetrievalResults, recall_at: Sequence[int] = ()) -> dict[str, torch.Tensor]:
    """float64 [N_q] score of every query for each metric (lone queries give NaN for the
    R-normalised ones); keys ``recall_at_<K>`` for Recall@K."""
    rel_full = results.relevance()
    rel = rel_full[:, : max(results.r_max, 1)]
    r = results.num_relevant.to(torch.float64)
    ranks = torch.arange(1, rel.shape[1] + 1, dtype=torch.float64)
    hits = rel.to(torch.float64)
    precision_at = hits.cumsum(1) / ranks
    within_r = ranks[None, :] <= r[:, None]
    out = {
        "precision_at_1": hits[:, 0],
        "r_precision": (hits * within_r).sum(1) / r,
        "map_at_r": (hits * precision_at * within_r).sum(1) / r,
        "mean_average_precision": (hits * precision_at).sum(1) / r,
    }
    first = torch.where(rel.any(1), rel.to(torch.int8).argmax(1).to(torch.float64) + 1, torch.inf)
    out["mean_reciprocal_rank"] = 1.0 / first
    for K in recall_at:
        out[f"recall_at_{K}"] = rel_full[:, :K].any(1).to(torch.float64)
    return out


def _reduce(scores, recall_at, reduce):
    out = {name: reduce(scores[name]) for name in _PER_QUERY}
    out["recall_at_k"] = {K: reduce(scores[f"recall_at_{K}"]) for K in recall_at}
    return out


def _check_recall_at(recall_at) -> tuple[int, ...]:
    values = tuple(int(K) for K in recall_at)
    if any(K < 1 for K in values):
        raise ConfigError("recall_at", f"every K must be >= 1, got {list(values)}")
    return values


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value

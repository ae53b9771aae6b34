"""Retrieval metrics of the fair (Musgrave) protocol, computed exactly from a kNN search.

Definitions (Gürbüz thesis §1.2; Musgrave et al.,
"A Metric Learning Reality Check", ECCV 2020, §3.2). For query i with label y_i, R_i is the number
of references labelled y_i (minus the query itself in leave-one-out mode) and rel_i(j) is 1 when
the j-th nearest reference (order: distance, then index) has label y_i:

- P@1 = rel_i(1) (the "R@1" of DML papers).
- R-precision = (1/R_i) sum_{j<=R_i} rel_i(j).
- MAP@R = (1/R_i) sum_{j<=R_i} rel_i(j) P_i(j), with P_i(j) = (1/j) sum_{l<=j} rel_i(l) (thesis
  misprint A2 resolved: precision at rank j).
- Recall@K = 1 if some j <= K has rel_i(j) = 1 (open-metric-learning's ``cmc@k``).

The metrics at a cutoff K (reported once per K of ``recall_at``, computed when named: they read
the first K neighbours only, so they score a search truncated at K, an ANN index's results or a
query -> gallery search at K). With h_i(K) = sum_{j<=K} rel_i(j) and the ranks beyond the
searchable references counted as misses, each as the peer that names it defines it, and where
the peers differ under distinct names:

- ``map_at_k`` = (1/R_i) sum_{j<=K} rel_i(j) P_i(j): pytorch-metric-learning's
  ``mean_average_precision`` with ``k=K`` (``AccuracyCalculator``, v2.9: the sum over the first
  K neighbours divided by R_i, so a query with R_i > K scores at most K / R_i).
- ``map_hits_at_k`` = (1/h_i(K)) sum_{j<=K} rel_i(j) P_i(j), 0 when h_i(K) = 0:
  open-metric-learning's ``map@k`` (``oml.functional.metrics.calc_map``: the precisions at the
  hits averaged over the hits found in the first K).
- ``map_capped_at_k`` = (1/min(K, R_i)) sum_{j<=K} rel_i(j) P_i(j): the AP@K of retrieval and
  recommendation competitions (1 for a perfect ranking whatever R_i); neither peer's.
- ``mrr_at_k`` = 1 / min{j <= K : rel_i(j) = 1}, 0 when no relevant reference is among the first
  K: pytorch-metric-learning's ``mean_reciprocal_rank`` with ``k=K``.
- ``precision_at_k`` = h_i(K) / K: pytorch-metric-learning's ``precision_at_k`` (its P@1 at K=1),
  the textbook precision at K.
- ``precision_capped_at_k`` = h_i(K) / min(K, R_i): open-metric-learning's ``precision@k``
  (``calc_precision``), which does not penalise a perfect ranking when R_i < K.
- mAP (``mean_average_precision``) = (1/R_i) sum_j t_ij / n_ij over the R_i relevant
  references j, n_ij being the rank of j in the whole ranking (every searchable reference) and
  t_ij the relevant references up to it: the standard average precision, as scikit-learn's
  ``average_precision_score`` per query (and pytorch-metric-learning's
  ``mean_average_precision`` when it searches every reference). It differs from MAP@R, which
  sums only over the first R_i ranks: a relevant reference ranked below R_i raises mAP, not
  MAP@R, so mAP >= MAP@R.
- MRR (``mean_reciprocal_rank``) = 1 / min_j n_ij, the rank of the first relevant reference in
  the whole ranking (uncut; R_i > 0, so one exists).

In mAP and MRR, references at equal distance form one tie group ranked as a whole, as
``average_precision_score`` groups equal scores (a collapsed model, all embeddings equal, scores
AP = R_i / N, RR = 1 / N); the other metrics read the first k neighbours ordered by (distance,
index). mAP and MRR are computed, when named, from the embeddings a block of queries at a time
(:mod:`gspdml.evaluation.whole_ranking`).

Queries with R_i = 0 ("lone" queries) are excluded from every mean and counted in
``num_lone_queries``; when every query is lone nothing can be scored: :class:`NoQueryToScore`,
never NaN. The class-averaged variant is the mean over classes of the per-class means.
Per-query arithmetic is float64.

NMI and AMI cluster the query embeddings with k-means, one cluster per query label (fixed
seed), and compare with sklearn's ``normalized_mutual_info_score`` (arithmetic mean) and
``adjusted_mutual_info_score``; being much slower, they run only with ``clustering=True`` (else
None). ``nmi_r1_hmean`` = 2 NMI R@1 / (NMI + R@1) (0 when both are 0), the validation score of
the ProxyNCA++ release (:mod:`gspdml.evaluation.selection`). Every metric here is one
registration (:func:`gspdml.evaluation.metric_registry.register`) declaring what it needs.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional, Union

import numpy as np
import torch

from gspdml.compat.hardware import Precision
from gspdml.errors import ConfigError, DataError
from gspdml.evaluation.clustering import clustering_scores
from gspdml.evaluation.exact_knn import DEFAULT_MEMORY_BUDGET, _as_matrix, retrieve
from gspdml.evaluation.metric_registry import (
    ALL,
    CLASS_SIZE,
    EACH_K,
    METRICS,
    Metric,
    Neighbours,
    check_metric_names,
    default_query_metrics,
    metrics_of_kind,
    register,
)
from gspdml.evaluation.results import Embeddings, LabelsLike, RetrievalResults
from gspdml.evaluation.whole_ranking import Ranking, whole_ranking_scores
from gspdml.settings.sections import RECALL_AT

#: where the search runs (None: where the embeddings are)
Device = Union[torch.device, str, None]

# --- the registered metrics (gspdml.evaluation.metric_registry) ----------------------------------


@register("map_at_r", "query", depth=CLASS_SIZE, selectable=True)
def map_at_r(n: Neighbours) -> torch.Tensor:
    """(1/R_i) sum_{j<=R_i} rel_i(j) P_i(j) (Musgrave et al., ECCV 2020, §3.2)."""
    return (n.hits * n.precision_at * n.within_r).sum(1) / n.r


@register("precision_at_1", "query", depth=1, selectable=True)
def precision_at_1(n: Neighbours) -> torch.Tensor:
    """rel_i(1), the "R@1" of DML papers."""
    return n.hits[:, 0]


@register("r_precision", "query", depth=CLASS_SIZE, selectable=True)
def r_precision(n: Neighbours) -> torch.Tensor:
    """(1/R_i) sum_{j<=R_i} rel_i(j)."""
    return (n.hits * n.within_r).sum(1) / n.r


@register("mean_average_precision", "query", depth=ALL, default=False)
def mean_average_precision(ranking: Ranking) -> torch.Tensor:
    """(1/R_i) sum_j t_ij / n_ij over the relevant references, ties ranked as a group."""
    precision = torch.where(ranking.valid, ranking.hits / ranking.ranks, 0.0)
    return (ranking.weights * precision).sum(1) / ranking.r


@register("mean_reciprocal_rank", "query", depth=ALL, default=False)
def mean_reciprocal_rank(ranking: Ranking) -> torch.Tensor:
    """1 / min_j n_ij, the rank of the first relevant reference in the whole ranking."""
    return 1.0 / torch.where(ranking.valid, ranking.ranks, torch.inf).min(1).values


@register("recall_at", "query", depth=EACH_K)
def recall_at(n: Neighbours, K: int) -> torch.Tensor:
    """1 if some j <= K has rel_i(j) = 1 (open-metric-learning's cmc@k)."""
    return n.relevance_all[:, :K].any(1).to(torch.float64)


@register("map_at_k", "query", depth=EACH_K, default=False)
def map_at_k(n: Neighbours, K: int) -> torch.Tensor:
    """(1/R_i) sum_{j<=K} rel_i(j) P_i(j) (pytorch-metric-learning's mean_average_precision)."""
    return n.precision_sum_at(K) / n.r


@register("map_hits_at_k", "query", depth=EACH_K, default=False)
def map_hits_at_k(n: Neighbours, K: int) -> torch.Tensor:
    """(1/h_i(K)) sum_{j<=K} rel_i(j) P_i(j), 0 if h_i(K) = 0 (open-metric-learning's map@k)."""
    hits = n.hits_at(K)
    return torch.where(hits > 0, n.precision_sum_at(K) / hits.clamp(min=1), 0.0)


@register("map_capped_at_k", "query", depth=EACH_K, default=False)
def map_capped_at_k(n: Neighbours, K: int) -> torch.Tensor:
    """(1/min(K, R_i)) sum_{j<=K} rel_i(j) P_i(j) (the competitions' AP@K)."""
    return n.precision_sum_at(K) / n.r.clamp(max=K)


@register("mrr_at_k", "query", depth=EACH_K, default=False)
def mrr_at_k(n: Neighbours, K: int) -> torch.Tensor:
    """1 / (rank of the first relevant neighbour), 0 beyond K (pytorch-metric-learning's MRR)."""
    return torch.where(n.first_hit <= K, 1.0 / n.first_hit, 0.0)


@register("precision_at_k", "query", depth=EACH_K, default=False)
def precision_at_k(n: Neighbours, K: int) -> torch.Tensor:
    """h_i(K) / K (pytorch-metric-learning's precision_at_k)."""
    return n.hits_at(K) / K


@register("precision_capped_at_k", "query", depth=EACH_K, default=False)
def precision_capped_at_k(n: Neighbours, K: int) -> torch.Tensor:
    """h_i(K) / min(K, R_i) (open-metric-learning's precision@k)."""
    return n.hits_at(K) / n.r.clamp(max=K)


@register("nmi", "clustering")
def nmi(labels: np.ndarray, clusters: np.ndarray) -> float:
    from sklearn.metrics import normalized_mutual_info_score  # ~1.6 s to import: only when used

    return float(normalized_mutual_info_score(labels, clusters))


@register("ami", "clustering")
def ami(labels: np.ndarray, clusters: np.ndarray) -> float:
    from sklearn.metrics import adjusted_mutual_info_score

    return float(adjusted_mutual_info_score(labels, clusters))


def harmonic_mean(a: float, b: float) -> float:
    """2ab / (a + b); 0 when a + b = 0 (both scores are 0)."""
    a, b = float(a), float(b)
    return 0.0 if a + b == 0 else 2.0 * a * b / (a + b)


@register("nmi_r1_hmean", "derived", inputs=("nmi", "precision_at_1"), selectable=True)
def nmi_r1_hmean(values: Mapping[str, Any]) -> float:
    return harmonic_mean(values["nmi"], values["precision_at_1"])


# --- computing them -------------------------------------------------------------------------------


class NoQueryToScore(DataError):
    """Every query is lone: no reference shares its class, so no retrieval metric is defined."""


def require_a_query_to_score(results: RetrievalResults) -> None:
    """A :class:`NoQueryToScore` when every query of ``results`` is lone (R_i = 0)."""
    if len(results.lone_queries) and not bool(results.lone_queries.all()):
        return
    queries, references = len(results.query_labels), len(results.reference_labels)
    if not queries:
        raise NoQueryToScore(
            f"no query to score: the split has no query images ({references} references); "
            "evaluate a split with images"
        )
    where = (
        "no class has two of the images (leave-one-out)"
        if results.excluded is not None
        else "no query's class is in the gallery"
    )
    raise NoQueryToScore(
        f"no query to score: {where}; {queries} queries, {references} references, every query "
        "without a relevant reference, so retrieval metrics are undefined. Give at least two "
        "images of some class (or gallery images of the query classes)"
    )


def retrieval_metrics(
    query: Embeddings,
    query_labels: LabelsLike,
    reference: Optional[Embeddings] = None,
    reference_labels: Optional[LabelsLike] = None,
    *,
    recall_at: Sequence[int] = RECALL_AT,
    metrics: Sequence[str] | None = None,
    clustering: bool = False,
    class_average: bool = False,
    per_class: bool = False,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: str = "torch",
    precision: Precision = "auto",
    device: Device = None,
    kmeans_backend: str = "sklearn",
    seed: int = 0,
) -> dict[str, Any]:
    """Exact retrieval metrics of ``query`` against ``reference`` (leave-one-out when None).

    Returns the per-query ``metrics`` (default
    :func:`~gspdml.evaluation.metric_registry.default_query_metrics`; ``{K: value}`` under
    ``<stem>_k`` for those of each K), ``nmi``, ``ami``, ``num_queries`` (scored),
    ``num_lone_queries`` (excluded) and ``k`` (neighbours searched); ``class_average=True`` adds
    ``class_averaged`` (mean of per-class means), ``per_class=True`` adds ``per_class``
    ({label: {metric: value}}). The search: :func:`gspdml.evaluation.exact_knn.knn`.
    """
    recall_at = check_recall_at(recall_at)
    names = _query_metrics(metrics)
    results = search_for_metrics(
        query,
        query_labels,
        reference,
        reference_labels,
        recall_at=recall_at,
        metrics=names,
        memory_budget=memory_budget,
        backend=backend,
        precision=precision,
        device=device,
    )
    out = metrics_from_results(
        results,
        recall_at=recall_at,
        metrics=names,
        class_average=class_average,
        per_class=per_class,
        whole_ranking=whole_ranking_metrics(
            results, query, reference, names, memory_budget=memory_budget, device=device
        ),
    )
    if clustering:
        out.update(
            clustering_scores(
                query, results.query_labels.numpy(), backend=kmeans_backend, seed=seed
            )
        )
    return out


def search_for_metrics(
    query: Embeddings,
    query_labels: LabelsLike,
    reference: Optional[Embeddings] = None,
    reference_labels: Optional[LabelsLike] = None,
    *,
    recall_at: Sequence[int] = RECALL_AT,
    metrics: Sequence[str] | None = None,
    min_k: int = 1,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: str = "torch",
    precision: Precision = "auto",
    device: Device = None,
) -> RetrievalResults:
    """The exact search (:func:`~gspdml.evaluation.exact_knn.retrieve`) as deep as the per-query
    ``metrics`` declare (R_i, the largest K), at least ``min_k``; never the whole ranking, which
    :func:`whole_ranking_metrics` scores (metrics that all read it search nothing: k = 0)."""
    recall_at = check_recall_at(recall_at)
    names = _query_metrics(metrics)
    whole_only = all(METRICS[name].depth == ALL for name in names) and int(min_k) <= 1
    return retrieve(
        query,
        query_labels,
        reference,
        reference_labels,
        k=0 if whole_only else None,
        min_k=max(search_depth(names, recall_at), int(min_k)),
        class_size=any(METRICS[name].depth == CLASS_SIZE for name in names),
        memory_budget=memory_budget,
        backend=backend,
        precision=precision,
        device=device,
    )


def whole_ranking_metrics(
    results: RetrievalResults,
    query: Embeddings,
    reference: Optional[Embeddings] = None,
    metrics: Sequence[str] | None = None,
    *,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    device: Device = None,
) -> dict[str, torch.Tensor]:
    """float64 [N_q] scores of the ``metrics`` that read the whole ranking (mAP, MRR), from the
    embeddings and the labels of ``results`` in bounded memory
    (:func:`~gspdml.evaluation.whole_ranking.whole_ranking_scores`); empty when none is asked."""
    whole = [name for name in _query_metrics(metrics) if METRICS[name].depth == ALL]
    if not whole:
        return {}
    if not len(results.query_labels):  # no query: nothing to rank (the metrics say so)
        return {name: torch.empty(0, dtype=torch.float64) for name in whole}
    q = _as_matrix(query, "query", device)
    return whole_ranking_scores(
        q,
        results.query_labels,
        None if reference is None else _as_matrix(reference, "reference", q.device),
        results.reference_labels,
        {name: METRICS[name].score for name in whole},
        memory_budget=memory_budget,
    )


def metrics_from_results(
    results: RetrievalResults,
    *,
    recall_at: Sequence[int] = RECALL_AT,
    metrics: Sequence[str] | None = None,
    class_average: bool = False,
    per_class: bool = False,
    whole_ranking: Mapping[str, torch.Tensor] | None = None,
) -> dict[str, Any]:
    """The per-query metrics of :func:`retrieval_metrics` from an existing search, fully labelled
    and as deep as each metric declares; ``whole_ranking``: the scores of the metrics of depth
    ``ALL`` (:func:`whole_ranking_metrics`; without them they need a search of every reference)."""
    recall_at = check_recall_at(recall_at)
    names = _query_metrics(metrics)
    if not results.fully_labelled:
        unknown = int((results.query_labels < 0).sum()), int((results.reference_labels < 0).sum())
        raise ConfigError(
            "labels",
            f"metrics need every label; {unknown[0]} queries and {unknown[1]} references have none",
        )
    require_a_query_to_score(results)
    given = dict(whole_ranking or {})
    scores = per_query_scores(results, recall_at, [n for n in names if n not in given])
    scores.update({name: given[name] for name in names if name in given})
    keep = ~results.lone_queries
    labels = results.query_labels[keep]
    scores = {name: v[keep] for name, v in scores.items()}
    out = _reduce(scores, names, recall_at, lambda v: v.mean().item())  # >= 1 scored query
    out.update(dict.fromkeys(metrics_of_kind("clustering")))
    out.update(num_queries=int(keep.sum()), num_lone_queries=int((~keep).sum()), k=results.k)
    if class_average or per_class:
        classes, inverse = torch.unique(labels, return_inverse=True)
        counts = torch.bincount(inverse, minlength=len(classes)).double()
        by_class = {
            name: torch.zeros(len(classes), dtype=torch.float64).index_add_(0, inverse, v) / counts
            for name, v in scores.items()
        }
        if class_average:
            out["class_averaged"] = _reduce(by_class, names, recall_at, lambda v: v.mean().item())
        if per_class:
            values = results.label_values[classes.numpy()]
            out["per_class"] = {
                _plain(value): _reduce(by_class, names, recall_at, _entry(c))
                for c, value in enumerate(values)
            }
    return out


def per_query_scores(
    results: RetrievalResults, recall_at: Sequence[int] = (), metrics: Sequence[str] | None = None
) -> dict[str, torch.Tensor]:
    """float64 [N_q] score of every query for each per-query metric (NaN for the R-normalised
    ones of lone queries), keyed as in the flat report; a ConfigError when the search is
    shallower than a metric declares."""
    names = _query_metrics(metrics)
    _check_depth(results, names, recall_at)
    neighbours = Neighbours.of_results(results)
    out: dict[str, torch.Tensor] = {}
    for name in names:
        metric = METRICS[name]
        if metric.depth == EACH_K:
            keys = zip(metric.keys(recall_at), recall_at)
            out.update({key: metric.score(neighbours, K) for key, K in keys})
        elif metric.depth == ALL:
            out[name] = metric.score(neighbours.ranking)
        else:
            out[name] = metric.score(neighbours)
    return out


def _reduce(
    scores: Mapping[str, torch.Tensor],
    names: Sequence[str],
    recall_at: Sequence[int],
    reduce: Callable[[torch.Tensor], float],
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        metric = METRICS[name]
        if metric.depth == EACH_K:
            keys = zip(metric.keys(recall_at), recall_at)
            out[metric.nested_key] = {K: reduce(scores[key]) for key, K in keys}
        else:
            out[name] = reduce(scores[name])
    return out


def _query_metrics(metrics: Sequence[str] | None) -> tuple[str, ...]:
    """The per-query metrics asked for (default :func:`default_query_metrics`), in registry
    order."""
    if metrics is None:
        return default_query_metrics()
    names = set(check_metric_names(metrics))
    wrong = [n for n in names if METRICS[n].kind != "query"]
    if wrong:
        allowed = ", ".join(metrics_of_kind("query"))
        raise ConfigError("metrics", f"{wrong} are not per-query metrics; allowed: {allowed}")
    return tuple(n for n in metrics_of_kind("query") if n in names)


def search_depth(names: Sequence[str] | None, recall_at: Sequence[int]) -> int:
    """The fewest neighbours the per-query metrics ``names`` need besides R_i (which the search
    adds itself) and the whole ranking (never searched)."""
    asked = _query_metrics(names)
    return max((K for name in asked for K in _fixed_depths(METRICS[name], recall_at)), default=1)


def _fixed_depths(metric: Metric, recall_at: Sequence[int]) -> list[int]:
    """The neighbour counts a metric needs besides R_i (none for R_i or the whole ranking)."""
    if metric.depth == EACH_K:
        return list(recall_at)
    return [metric.depth] if isinstance(metric.depth, int) else []


def _entry(c: int) -> Callable[[torch.Tensor], float]:
    """The reduction to entry ``c`` (class ``c``'s mean)."""
    return lambda v: v[c].item()


def _check_depth(results: RetrievalResults, names: Sequence[str], recall_at: Sequence[int]) -> None:
    searchable = results.num_searchable
    for name in names:
        metric = METRICS[name]
        if metric.depth == CLASS_SIZE and results.k < min(results.r_max, searchable):
            raise ConfigError(
                "k", f"{name} needs k >= max R = {results.r_max}, search has k={results.k}"
            )
        if metric.depth == ALL and results.k < searchable:
            raise ConfigError(
                "k", f"{name} needs the whole ranking (k={searchable}), search has k={results.k}"
            )
        needed = max(_fixed_depths(metric, recall_at), default=0)
        if needed > results.k and results.k < searchable:
            field = "recall_at" if metric.depth == EACH_K else "k"
            raise ConfigError(field, f"{name} needs k >= {needed}, search has k={results.k}")


def check_recall_at(recall_at: Any, field: str = "recall_at") -> tuple[int, ...]:
    """The K of Recall@K as a tuple of ints, or a ConfigError naming ``field``: each K an
    integer >= 1 (a float such as 1.5 or a bool is refused, never rounded)."""
    listed = isinstance(recall_at, Iterable) and not isinstance(recall_at, (str, bytes))
    values = tuple(recall_at) if listed else ()
    integers = all(isinstance(K, numbers.Integral) and not isinstance(K, bool) for K in values)
    if not listed or not integers or any(K < 1 for K in values):
        raise ConfigError(
            field, f"expected a list of integers >= 1 (the K of Recall@K), got {recall_at!r}"
        )
    return tuple(int(K) for K in values)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def flatten_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """``{"recall_at_k": {1: .9}}`` -> ``{"recall_at_1": .9}``; numbers only (counts as
    integers, None left out), the flat schema of logs and ``results.json``."""
    flat: dict[str, float] = {}
    for key, value in metrics.items():
        if isinstance(value, Mapping):
            stem = key[: -len("_k")] if key.endswith("_k") else key
            flat.update({f"{stem}_{k}": float(v) for k, v in value.items()})
        elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            flat[key] = int(value)  # counts stay integers
        elif isinstance(value, (float, np.floating)):
            flat[key] = float(value)
    return flat

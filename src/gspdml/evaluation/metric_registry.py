"""The registry of evaluation metrics: adding a metric is one :func:`register` call.

A :class:`Metric` declares what it needs, so the evaluation service
(:mod:`gspdml.evaluation.service`) searches as deep as the requested metrics need and runs
k-means only when one of them needs it. Three kinds:

- ``"query"``: ``score(neighbours) -> float64 [N_q]`` over a :class:`Neighbours` (each query's
  ranked relevance and R_i), averaged over the queries with R_i > 0. ``depth`` is how many
  neighbours a query needs: a number, :data:`CLASS_SIZE` (R_i), :data:`EACH_K` (one value per K
  of ``recall_at``, ``score(neighbours, K)``, reported as ``<stem>_<K>``: ``recall_at_1``; nested
  as ``{K: value}`` under ``<stem>_k``) or :data:`ALL` (``score(ranking)`` over the
  :class:`~gspdml.evaluation.whole_ranking.Ranking` of every relevant reference);
- ``"clustering"``: ``score(labels, clusters) -> float`` after k-means of the query embeddings
  into one cluster per label (:mod:`gspdml.evaluation.clustering`);
- ``"derived"``: ``score(values) -> float`` from the values of the metrics named in ``inputs``.

``selectable`` marks the metrics a run may be selected by (:mod:`gspdml.evaluation.selection`),
``default`` those computed when none is named (:func:`default_query_metrics`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Optional, TypeVar, Union

import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.results import RetrievalResults
from gspdml.evaluation.whole_ranking import Ranking, ranking_of_search

#: ``depth`` of a metric that needs the first R_i neighbours of query i (its class size)
CLASS_SIZE = "class_size"
#: ``depth`` of a metric reported once per K of ``recall_at``, needing K neighbours
EACH_K = "each_k"
#: ``depth`` of a metric that reads the whole ranking (every searchable reference), as the full
#: mAP and the uncut MRR (:mod:`gspdml.evaluation.whole_ranking`)
ALL = "all"
KINDS = ("query", "clustering", "derived")
#: a metric's depth: a number of neighbours, CLASS_SIZE, EACH_K or ALL (None: not per-query)
Depth = Union[int, str, None]
_Score = TypeVar("_Score", bound=Callable[..., Any])


@dataclass(frozen=True)
class Metric:
    """One registered metric (module docstring): its name, kind, function and needs."""

    name: str
    kind: str
    score: Callable[..., Any]
    depth: Depth = None
    inputs: tuple[str, ...] = ()
    selectable: bool = False
    default: bool = True

    @property
    def needs_clustering(self) -> bool:
        """Whether computing it runs k-means (itself or through an input)."""
        return self.kind == "clustering" or any(METRICS[n].needs_clustering for n in self.inputs)

    @property
    def stem(self) -> str:
        """The name without a trailing ``_k`` (``map_at_k`` -> ``map_at``)."""
        return self.name[: -len("_k")] if self.name.endswith("_k") else self.name

    @property
    def nested_key(self) -> str:
        """Its key in nested results: ``<stem>_k`` for :data:`EACH_K` (``{K: value}``), else
        the name."""
        return f"{self.stem}_k" if self.depth == EACH_K else self.name

    @property
    def depth_class(self) -> str:
        """``bounded`` (a fixed number of neighbours or R_i), ``per-k`` (K of each reported
        value) or ``whole ranking`` (every reference); ``clustering`` or ``derived`` for the
        other kinds (``gspdml list metrics``)."""
        if self.kind != "query":
            return self.kind
        return {EACH_K: "per-k", ALL: "whole ranking"}.get(str(self.depth), "bounded")

    @property
    def cost_class(self) -> str:
        """What computing it costs (``gspdml list metrics``): a kNN search to the depth it
        reads, every (query, reference) pair, k-means, or nothing beyond its inputs."""
        if self.kind == "clustering":
            return "k-means of the query embeddings"
        if self.kind == "derived":
            return f"from {', '.join(self.inputs)}"
        if self.depth == ALL:
            return "every query-reference pair (time N_q x N_r, memory bounded)"
        depth = {CLASS_SIZE: "R_i", EACH_K: "K"}.get(str(self.depth), str(self.depth))
        return f"kNN search to depth {depth}"

    def keys(self, recall_at: Iterable[int] = ()) -> list[str]:
        """Its keys in a flat report: ``<stem>_<K>`` per K for :data:`EACH_K`, else the name."""
        return [f"{self.stem}_{K}" for K in recall_at] if self.depth == EACH_K else [self.name]


#: name -> metric, in the order of the flat report within each kind
METRICS: dict[str, Metric] = {}


def register(
    name: str,
    kind: str,
    *,
    depth: Depth = None,
    inputs: tuple[str, ...] = (),
    selectable: bool = False,
    default: bool = True,
) -> Callable[[_Score], _Score]:
    """Decorator: register ``score`` as the metric ``name`` (module docstring)."""
    if kind not in KINDS:
        raise ConfigError("kind", f"unknown metric kind {kind!r}; allowed: {', '.join(KINDS)}")
    if (kind == "query") != (depth is not None):
        raise ConfigError(
            "depth", f"metric {name!r}: a depth is what a per-query metric (and only one) declares"
        )

    def add(score: _Score) -> _Score:
        if name in METRICS:
            raise ConfigError("name", f"metric {name!r} is registered twice")
        unknown = [i for i in inputs if i not in METRICS]
        if unknown:
            raise ConfigError("inputs", f"metric {name!r} reads unregistered metrics {unknown}")
        METRICS[name] = Metric(name, kind, score, depth, tuple(inputs), selectable, default)
        return score

    return add


def metrics_of_kind(kind: str) -> tuple[str, ...]:
    return tuple(name for name, metric in METRICS.items() if metric.kind == kind)


def bounded_query_metrics() -> tuple[str, ...]:
    """The per-query metrics that read a bounded number of neighbours (all but those of depth
    :data:`ALL`): what a post-processed search can compute."""
    return tuple(name for name, m in METRICS.items() if m.kind == "query" and m.depth != ALL)


def default_query_metrics() -> tuple[str, ...]:
    """The per-query metrics computed when none is named (MAP@R, P@1, R-precision, Recall@K)."""
    return tuple(name for name, m in METRICS.items() if m.kind == "query" and m.default)


def check_metric_names(names: str | Iterable[str], field: str = "metrics") -> tuple[str, ...]:
    """``names`` as a tuple, or a ConfigError naming ``field`` and the registered metrics."""
    listed = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in listed if n not in METRICS]
    if unknown:
        raise ConfigError(field, f"unknown metric(s) {unknown}; allowed: {', '.join(METRICS)}")
    return listed


def with_inputs(names: str | Iterable[str]) -> tuple[str, ...]:
    """``names`` and every metric they are derived from, in registry order."""
    wanted: set[str] = set()

    def visit(name: str) -> None:
        if name not in wanted:
            wanted.add(name)
            for other in METRICS[name].inputs:
                visit(other)

    for name in check_metric_names(names):
        visit(name)
    return tuple(name for name in METRICS if name in wanted)


class Neighbours:
    """What the per-query metrics read from a search: the relevance of each query's neighbours,
    nearest first, and R_i; the float64 quantities several metrics share are computed once.

    Built from a search's :class:`~gspdml.evaluation.results.RetrievalResults`
    (:meth:`of_results`) or from a relevance matrix and R_i alone (any search truncated at k,
    e.g. an ANN index's results or a peer's; ``distances`` are then needed only by the metrics
    of depth :data:`ALL`). With r_max = max_i R_i: ``relevance_all`` [N_q, k]; ``relevance`` its
    first max(r_max, 1) columns; ``hits`` that as float64; ``ranks`` 1..; ``precision_at`` [i, j]
    = P_i(j), the precision at rank j; ``within_r`` [i, j] = j <= R_i; ``r`` R_i as float64;
    for the metrics at a cutoff K (:meth:`hits_at`, :meth:`precision_sum_at`,
    :attr:`first_hit`) the same over all k columns; ``ranking`` the
    :class:`~gspdml.evaluation.whole_ranking.Ranking` of a search of every reference (the
    metrics of depth :data:`ALL`).
    """

    def __init__(
        self,
        relevance: torch.Tensor,
        num_relevant: torch.Tensor,
        distances: Optional[torch.Tensor] = None,
    ):
        self.relevance_all = relevance.bool()
        self.r = num_relevant.to(torch.float64)
        r_max = int(num_relevant.max()) if len(num_relevant) else 0
        self.relevance = self.relevance_all[:, : max(r_max, 1)]
        self.distances = distances

    @classmethod
    def of_results(cls, results: RetrievalResults) -> Neighbours:
        return cls(results.relevance(), results.num_relevant, results.distances)

    @functools.cached_property
    def ranks(self) -> torch.Tensor:
        return torch.arange(1, self.relevance.shape[1] + 1, dtype=torch.float64)

    @functools.cached_property
    def hits(self) -> torch.Tensor:
        return self.relevance.to(torch.float64)

    @functools.cached_property
    def precision_at(self) -> torch.Tensor:
        return self.hits.cumsum(1) / self.ranks

    @functools.cached_property
    def within_r(self) -> torch.Tensor:
        return self.ranks[None, :] <= self.r[:, None]

    # --- at a cutoff K, over every searched column ---------------------------------------------

    @functools.cached_property
    def _hits_all(self) -> torch.Tensor:
        return self.relevance_all.to(torch.float64).cumsum(1)

    @functools.cached_property
    def _precision_sums(self) -> torch.Tensor:
        """[i, j] = sum_{l <= j} rel_i(l) P_i(l)."""
        ranks = torch.arange(1, self.relevance_all.shape[1] + 1, dtype=torch.float64)
        return (self.relevance_all * (self._hits_all / ranks)).cumsum(1)

    def _at(self, cumulative: torch.Tensor, K: int) -> torch.Tensor:
        """Column K of a cumulative sum over the searched columns: the last searched one within
        the first K (a search shallower than K holds every searchable reference); 0 before any."""
        column = min(int(K), cumulative.shape[1]) - 1
        if column < 0:
            return torch.zeros(len(self.r), dtype=torch.float64)
        return cumulative[:, column]

    def hits_at(self, K: int) -> torch.Tensor:
        """float64 [N_q]: h_i(K) = sum_{j <= K} rel_i(j)."""
        return self._at(self._hits_all, K)

    def precision_sum_at(self, K: int) -> torch.Tensor:
        """float64 [N_q]: sum_{j <= K} rel_i(j) P_i(j)."""
        return self._at(self._precision_sums, K)

    @functools.cached_property
    def first_hit(self) -> torch.Tensor:
        """float64 [N_q]: the rank of the first relevant neighbour searched (inf if none)."""
        rel = self.relevance_all
        if rel.shape[1] == 0:
            return torch.full((len(self.r),), math.inf, dtype=torch.float64)
        first = rel.to(torch.uint8).argmax(1).to(torch.float64) + 1
        return torch.where(rel.any(1), first, math.inf)

    @functools.cached_property
    def ranking(self) -> Ranking:
        if self.distances is None:
            raise ConfigError(
                "distances", "the whole-ranking metrics need the distances of a search"
            )
        return ranking_of_search(self.relevance_all, self.distances, self.r)

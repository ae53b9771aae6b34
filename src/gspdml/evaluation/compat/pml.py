"""pytorch-metric-learning's ``AccuracyCalculator`` (v2.9) on gspdml's exact search.

The neighbours are gspdml's exact ones, ordered by (distance, index)
(:mod:`gspdml.evaluation.exact_knn`); PML's faiss search orders tied neighbours its own way, so
the values differ only where neighbours tie. With ``num_k`` the neighbours searched (``k=None``:
every reference; ``"max_bin_count"``: the largest number of references sharing a query's label,
minus one when the reference set holds the queries; an integer: that many, capped at the searchable
references, beyond which PML would read faiss's -1 padding) and R_i the references relevant to
query i (PML's ``label_counts``), each metric is PML's:

- ``precision_at_1`` = rel_i(1);
- ``mean_average_precision`` = (1/R_i) sum_{j<=num_k} rel_i(j) P_i(j) (``map_at_k`` at K = num_k);
- ``mean_average_precision_at_r`` = (1/R_i) sum_{j<=min(num_k, R_i)} rel_i(j) P_i(j) (MAP@R, cut
  at num_k as PML cuts it when k < R_i);
- ``mean_reciprocal_rank`` = 1 / first relevant rank within num_k, else 0 (``mrr_at_k``);
- ``r_precision`` = (1/m) sum_{j<=m} rel_i(j), m = min(num_k, R_i) (R-precision; PML's relevance
  mask is cut at num_k);
- ``NMI``, ``AMI``: k-means of the queries into one cluster per query label
  (:func:`gspdml.evaluation.clustering.clustering_scores`, scikit-learn's k-means where PML runs
  faiss's, so the clusters, not the definition, may differ).

Queries whose label has no other reference (R_i = 0) are left out of every mean, as PML leaves
them out; when no query is left, each metric is NaN (a list of NaN per query label with
``return_per_class``), PML's answer. ``avg_of_avgs`` averages the per-label means;
``return_per_class`` lists them by ascending label. Labels are compared by equality (integers
or strings; integral floats, which PML's own tests pass, are read as integers);
``label_comparison_fn``, ``knn_func`` and ``kmeans_func`` are refused with an error that says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Optional, Union

import numpy as np
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.clustering import clustering_scores
from gspdml.evaluation.exact_knn import knn
from gspdml.evaluation.metric_registry import METRICS, Neighbours
from gspdml.evaluation.results import (
    Embeddings,
    LabelsLike,
    drop_excluded,
    encode_labels,
    relevant_counts,
)

#: PML's metric names, in the order its ``get_accuracy`` returns them
PML_METRICS = (
    "AMI",
    "NMI",
    "mean_average_precision",
    "mean_average_precision_at_r",
    "mean_reciprocal_rank",
    "precision_at_1",
    "r_precision",
)
_CLUSTERING = ("AMI", "NMI")
_UNSUPPORTED = ("label_comparison_fn", "knn_func", "kmeans_func")
#: the per-query score of every kNN metric (empty when none is defined) and the not-lone mask
KnnScores = tuple[dict[str, torch.Tensor], torch.Tensor]


class AccuracyCalculator:
    """pytorch-metric-learning's ``AccuracyCalculator``, same arguments (module docstring)."""

    def __init__(
        self,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
        avg_of_avgs: bool = False,
        return_per_class: bool = False,
        k: Union[int, str, None] = None,
        label_comparison_fn: Optional[Callable[..., Any]] = None,
        device: Any = None,
        knn_func: Any = None,
        kmeans_func: Any = None,
    ):
        given = dict(label_comparison_fn=label_comparison_fn, knn_func=knn_func)
        given["kmeans_func"] = kmeans_func
        for name in _UNSUPPORTED:
            if given[name] is not None:
                raise ConfigError(
                    name,
                    "gspdml's AccuracyCalculator compares labels by equality, searches exactly "
                    "and clusters with scikit-learn's k-means; leave it out",
                )
        self.metrics = _chosen(PML_METRICS, include, exclude)
        if avg_of_avgs and return_per_class:
            raise ConfigError(
                "avg_of_avgs", "avg_of_avgs and return_per_class are mutually exclusive"
            )
        integer = isinstance(k, int) and not isinstance(k, bool) and k > 0
        if not integer and k not in (None, "max_bin_count"):
            raise ConfigError(
                "k", f"must be an integer greater than 0, or None, or 'max_bin_count', got {k!r}"
            )
        self.k = k
        self.avg_of_avgs = avg_of_avgs
        self.return_per_class = return_per_class
        self.device = device

    def get_curr_metrics(self) -> list[str]:
        return list(self.metrics)

    def get_accuracy(
        self,
        query: Embeddings,
        query_labels: LabelsLike,
        reference: Optional[Embeddings] = None,
        reference_labels: Optional[LabelsLike] = None,
        ref_includes_query: bool = False,
        include: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> dict[str, Any]:
        """``{metric: value}`` of PML's metrics (module docstring); ``reference=None``: the
        queries are the references, each query left out of its own search."""
        names = _chosen(self.metrics, include, exclude)
        loo = reference is None
        if reference is None:
            reference, reference_labels, ref_includes_query = query, query_labels, True
        q, r = _matrix(query, self.device), _matrix(reference, self.device)
        q_lab, r_lab = _labels(query_labels), _labels(reference_labels)
        if len(q) != len(q_lab) or len(r) != len(r_lab):
            raise ConfigError("labels", "embeddings and labels must have the same length")
        if ref_includes_query and not loo:
            _check_reference_starts_with_query(q, r, q_lab, r_lab)
        values, q_codes, r_codes = encode_labels(q_lab, r_lab)
        out: dict[str, Any] = {}
        knn_names = [n for n in names if n not in _CLUSTERING]
        if knn_names:
            scores = self._knn_scores(q, r, q_codes, r_codes, values, loo, ref_includes_query)
            out.update({n: self._reduce(scores, n, q_codes, values) for n in knn_names})
        if any(n in _CLUSTERING for n in names):
            clusters = clustering_scores(q, q_codes.numpy())
            out.update({n: clusters[n.lower()] for n in _CLUSTERING if n in names})
        return {n: out[n] for n in names}

    def _knn_scores(
        self,
        q: torch.Tensor,
        r: torch.Tensor,
        q_codes: torch.Tensor,
        r_codes: torch.Tensor,
        values: np.ndarray,
        loo: bool,
        ref_includes_query: bool,
    ) -> KnnScores:
        """float64 [N_q] per-query score of every kNN metric, and the not-lone mask."""
        excluded = torch.arange(len(q)) if ref_includes_query else None
        num_relevant = relevant_counts(q_codes, r_codes, len(values), excluded)
        scored = num_relevant > 0
        searchable = len(r) - int(ref_includes_query)
        num_k = self._num_k(q_codes, r_codes, len(values), ref_includes_query, searchable)
        if not bool(scored.any()) or num_k < 1:
            return {}, scored
        if loo:
            _, indices = knn(q, None, num_k)
        else:
            _, indices = knn(q, r, min(num_k + int(ref_includes_query), len(r)))
            if ref_includes_query:  # PML's rule: the own row dropped where listed, else the last
                (indices,) = drop_excluded(torch.arange(len(q), device=indices.device), indices)
        n = Neighbours(r_codes[indices.cpu()] == q_codes[:, None], num_relevant)
        cut_r = n.r > num_k
        scores = {
            "precision_at_1": METRICS["precision_at_1"].score(n),
            "mean_average_precision": METRICS["map_at_k"].score(n, num_k),
            "mean_average_precision_at_r": METRICS["map_at_r"].score(n),
            "mean_reciprocal_rank": METRICS["mrr_at_k"].score(n, num_k),
            "r_precision": torch.where(
                cut_r, METRICS["precision_at_k"].score(n, num_k), METRICS["r_precision"].score(n)
            ),
        }
        return scores, scored

    def _num_k(
        self,
        q_codes: torch.Tensor,
        r_codes: torch.Tensor,
        num_labels: int,
        ref_includes_query: bool,
        searchable: int,
    ) -> int:
        """PML's ``determine_k``, capped at the searchable references."""
        if self.k is None:
            return searchable
        if self.k == "max_bin_count":
            counts = torch.bincount(r_codes, minlength=num_labels)[torch.unique(q_codes)]
            return min(int(counts.max()) - int(ref_includes_query), searchable)
        return min(int(self.k), searchable)

    def _reduce(
        self, knn_scores: KnnScores, name: str, q_codes: torch.Tensor, values: np.ndarray
    ) -> float | list[float]:
        scores, scored = knn_scores
        labels = torch.unique(q_codes)
        if not scores:  # no query has a relevant reference: PML's NaN
            return [math.nan] * len(labels) if self.return_per_class else math.nan
        v, codes = scores[name][scored], q_codes[scored]
        if not (self.avg_of_avgs or self.return_per_class):
            return v.mean().item()
        present, inverse = torch.unique(codes, return_inverse=True)
        sums = torch.zeros(len(present), dtype=torch.float64).index_add_(0, inverse, v)
        means = sums / torch.bincount(inverse, minlength=len(present))
        if self.return_per_class:
            order = np.argsort(values[present.numpy()], kind="stable")
            return means[torch.from_numpy(order)].tolist()
        return means.mean().item()


def _chosen(
    available: Sequence[str], include: Sequence[str], exclude: Sequence[str]
) -> tuple[str, ...]:
    """PML's ``include``/``exclude`` rule: ``include`` (empty: all) minus ``exclude``."""
    for given in (include, exclude):
        if not isinstance(given, (tuple, list)):
            raise TypeError(f"Arguments must be of type tuple, not {type(given)}.")
        unknown = [m for m in given if m not in PML_METRICS]
        if unknown:
            raise ConfigError("include", f"unknown metrics {unknown}; allowed: {list(PML_METRICS)}")
    wanted = set(include) if include else set(available)
    return tuple(m for m in available if m in wanted and m not in exclude)


def _matrix(x: Embeddings, device: Any) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x) if not isinstance(x, torch.Tensor) else x)
    if t.ndim == 1:
        raise ConfigError("query", f"expected embeddings [N, D], got shape {tuple(t.shape)}")
    t = t.detach().to(torch.float32 if not t.is_floating_point() else t.dtype)
    return t.to(device) if device is not None else t


def _labels(labels: Optional[LabelsLike]) -> np.ndarray:
    """1-D integer or string labels (None is refused); integral floats become integers."""
    a = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if a.ndim != 1:
        raise ConfigError(
            "labels",
            f"expected one label per row (1-D), got shape {a.shape}; multi-dimensional labels "
            "need PML's label_comparison_fn, which gspdml does not take",
        )
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)) or not np.array_equal(a, np.round(a)):
            raise ConfigError("labels", "float labels must hold whole numbers (class ids)")
        return a.astype(np.int64)
    return a


def _check_reference_starts_with_query(
    q: torch.Tensor, r: torch.Tensor, q_lab: np.ndarray, r_lab: np.ndarray
) -> None:
    same = len(r) >= len(q) and torch.allclose(q.double(), r[: len(q)].double())
    if not same or not np.array_equal(q_lab, r_lab[: len(q)]):
        raise ConfigError(
            "ref_includes_query",
            "True needs the first len(query) rows of reference (and of reference_labels) to be "
            "the queries (and their labels)",
        )

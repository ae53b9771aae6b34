"""Retrieval metrics of the embeddings of one evaluation split, flat for logs and results: the
evaluation service (:mod:`gspdml.evaluation.service`) with every per-query metric, leave-one-out
on the query set when the split has no gallery (a query's own item is excluded), else query ->
gallery."""

from __future__ import annotations

from typing import Iterable

from gspdml.evaluation.service import EvalSpec, evaluate_embeddings


def split_metrics(
    query,
    query_labels,
    gallery=None,
    gallery_labels=None,
    recall_at: Iterable[int] = (1, 2, 4, 8),
    *,
    clustering: bool = False,
) -> dict[str, float]:
    """Flat retrieval metrics (:class:`~gspdml.evaluation.service.EvalReport`);
    ``clustering=True`` adds ``nmi`` and ``ami`` of k-means on the query embeddings
    (:mod:`gspdml.evaluation.clustering`)."""
    spec = EvalSpec(recall_at=tuple(recall_at), clustering=clustering)
    return evaluate_embeddings(query, query_labels, gallery, gallery_labels, spec).metrics

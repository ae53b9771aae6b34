"""Retrieval metrics of the embeddings of one evaluation split, flat for logs and results: the
evaluation service (:mod:`gspdml.evaluation.service`) with every per-query metric, leave-one-out
on the query set when the split has no gallery (a query's own item is excluded), else query ->
gallery."""

from __future__ import annotations

from typing import Iterable, Optional

from gspdml.evaluation.results import Embeddings, LabelsLike
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings
from gspdml.settings.sections import RECALL_AT


def split_metrics(
    query: Embeddings,
    query_labels: LabelsLike,
    gallery: Optional[Embeddings] = None,
    gallery_labels: Optional[LabelsLike] = None,
    recall_at: Iterable[int] = RECALL_AT,
    *,
    clustering: bool = False,
) -> dict[str, float]:
    """Flat retrieval metrics (:class:`~gspdml.evaluation.service.EvalReport`);
    ``clustering=True`` adds ``nmi`` and ``ami`` of k-means on the query embeddings
    (:mod:`gspdml.evaluation.clustering`)."""
    spec = EvalSpec(recall_at=tuple(recall_at), clustering=clustering)
    return evaluate_embeddings(query, query_labels, gallery, gallery_labels, spec).metrics

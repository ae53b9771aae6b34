"""Retrieval metrics of a model on an evaluation split, flattened to numbers for logs and results.

:func:`evaluate_split` embeds the split (:func:`gspdml.models.inference.split_embeddings`) and
scores it with :func:`split_metrics`: leave-one-out on the query set when the split has no
gallery (a query's own item is excluded), else query -> gallery
(:func:`gspdml.evaluation.metrics.retrieval_metrics`: Recall@K, MAP@R, R-precision and the
other kNN metrics, all on the same neighbours). :func:`flatten_metrics` turns ``{"recall_at_k": {1: .9}}`` into
``{"recall_at_1": .9}``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np
from torch import nn

from gspdml.data.base import EvalSplit
from gspdml.evaluation.metrics import retrieval_metrics
from gspdml.models.inference import split_embeddings


def flatten_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """``{"recall_at_k": {1: .9}}`` -> ``{"recall_at_1": .9}``; numbers only (counts as integers), for JSON logs."""
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


def split_metrics(query, query_labels, gallery=None, gallery_labels=None, recall_at: Iterable[int] = (1, 2, 4, 8),
                  *, clustering: bool = False) -> dict[str, float]:
    """Retrieval metrics, flattened: leave-one-out when ``gallery`` is None, else query -> gallery;
    ``clustering=True`` adds ``nmi`` and ``ami`` of k-means on the query embeddings
    (:mod:`gspdml.evaluation.clustering`)."""
    return flatten_metrics(retrieval_metrics(query, query_labels, gallery, gallery_labels, recall_at=tuple(recall_at),
                                             clustering=clustering))


def evaluate_split(model: nn.Module, split: EvalSplit, *, recall_at: Iterable[int] = (1, 2, 4, 8), **embedding: Any) -> dict[str, float]:
    """Retrieval metrics of ``model`` on a split: leave-one-out, or query -> gallery;
    ``embedding``: the options of :func:`gspdml.models.inference.embed` (``batch_size``,
    ``device``, ``precision``, ``num_workers``, ``progress``)."""
    return split_metrics(*split_embeddings(model, split, **embedding), recall_at=recall_at)

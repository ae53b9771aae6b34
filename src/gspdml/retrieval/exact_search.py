"""Search an index with the exact kNN engine of :mod:`gspdml.evaluation.exact_knn` (squared
Euclidean, pinned (distance, index) tie rule, bounded memory, torch or faiss candidates). An
index reports ``euclidean`` ``d(q, g) = ||q - g||_2`` or ``cosine`` ``d(q, g) = 1 - q.g / (|q|
|g|)``, half the squared distance of the normalised vectors; for L2-normalised embeddings the two
rank alike (``||q - g||^2 = 2 - 2 q.g``).
"""

from __future__ import annotations

import importlib.util

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.evaluation.exact_knn import knn

METRICS = ("euclidean", "cosine")
BACKENDS = ("torch", "faiss")


def search(
    queries: torch.Tensor,
    vectors: torch.Tensor,
    k: int,
    metric: str = "euclidean",
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(distances [Q, k] float32, indices [Q, k] int64)`` of the ``k`` nearest index vectors,
    nearest first; ``backend="auto"`` is faiss where it is installed, torch otherwise."""
    if metric not in METRICS:
        raise ConfigError("metric", f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    if backend == "auto":
        backend = "faiss" if importlib.util.find_spec("faiss") is not None else "torch"
    if backend not in BACKENDS:
        raise ConfigError(
            "backend", f"unknown backend {backend!r}; allowed: auto, {', '.join(BACKENDS)}"
        )
    if queries.dim() != 2 or vectors.dim() != 2 or queries.shape[1] != vectors.shape[1]:
        raise ValueError(
            f"queries {tuple(queries.shape)} and index vectors {tuple(vectors.shape)} must be [*, D] with the same D"
        )
    if metric == "cosine":
        queries, vectors = F.normalize(queries.float(), dim=1), F.normalize(vectors.float(), dim=1)
    squared, indices = knn(queries, vectors, k, backend=backend)
    distances = squared / 2.0 if metric == "cosine" else squared.sqrt()
    return distances.float(), indices

"""Exact k-nearest-neighbour search for retrieval indexes: chunked torch or faiss (flat).

Both backends return the same thing, ``(distances [Q, k] float32, indices [Q, k] int64)``
sorted by increasing distance, for two metrics:

* ``euclidean``: ``d(q, g) = ||q - g||_2``, computed as ``sqrt(max(0, |q|^2 + |g|^2 - 2 q.g))``;
* ``cosine``: ``d(q, g) = 1 - q.g / (|q| |g|)``.

For L2-normalised embeddings the two give the same ranking (``||q - g||^2 = 2 - 2 q.g``).
The torch backend never holds more than ``chunk x N`` distances.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError

METRICS = ("euclidean", "cosine")


def _check(queries: torch.Tensor, vectors: torch.Tensor, k: int, metric: str) -> None:
    if metric not in METRICS:
        raise ConfigError("metric", f"unknown metric {metric!r}; allowed: {', '.join(METRICS)}")
    if queries.dim() != 2 or vectors.dim() != 2 or queries.shape[1] != vectors.shape[1]:
        raise ValueError(f"queries {tuple(queries.shape)} and index vectors {tuple(vectors.shape)} must be [*, D] with the same D")
    if not 1 <= k <= vectors.shape[0]:
        raise ConfigError("k", f"must be between 1 and the index size {vectors.shape[0]}, got {k}")


def search_torch(queries: torch.Tensor, vectors: torch.Tensor, k: int, metric: str = "euclidean", chunk: int = 1024):
    """Exact search by blocks of ``chunk`` queries (module docstring for the metrics)."""
    _check(queries, vectors, k, metric)
    vectors = vectors.float()
    if metric == "cosine":
        vectors = F.normalize(vectors, dim=1)
    else:
        squared_norms = vectors.pow(2).sum(1)
    distances, indices = [], []
    for start in range(0, queries.shape[0], chunk):
        block = queries[start : start + chunk].float()
        if metric == "cosine":
            dist = 1.0 - F.normalize(block, dim=1) @ vectors.T
        else:
            dist = (block.pow(2).sum(1, keepdim=True) + squared_norms - 2.0 * block @ vectors.T).clamp_min(0).sqrt()
        values, index = torch.topk(dist, k, dim=1, largest=False, sorted=True)
        distances.append(values)
        indices.append(index)
    return torch.cat(distances), torch.cat(indices).long()


def search_faiss(queries: torch.Tensor, vectors: torch.Tensor, k: int, metric: str = "euclidean"):
    """Exact search with a faiss flat index (``IndexFlatL2`` / ``IndexFlatIP`` on normalised vectors)."""
    _check(queries, vectors, k, metric)
    faiss = faiss_module()
    base = vectors.float().contiguous()
    query = queries.float().contiguous()
    if metric == "cosine":
        base, query = F.normalize(base, dim=1), F.normalize(query, dim=1)
        index = faiss.IndexFlatIP(base.shape[1])
    else:
        index = faiss.IndexFlatL2(base.shape[1])
    index.add(base.numpy())
    values, found = index.search(query.numpy(), k)
    values, found = torch.from_numpy(values), torch.from_numpy(found).long()
    distances = 1.0 - values if metric == "cosine" else values.clamp_min(0).sqrt()
    return distances, found


def faiss_module():
    """The faiss module, or a clear error naming the extra that provides it."""
    try:
        import faiss
    except ImportError:
        raise ConfigError("backend", "the faiss backend needs faiss: pip install 'gspdml[faiss]' (faiss-cpu)") from None
    return faiss


def faiss_available() -> bool:
    try:
        import faiss  # noqa: F401
    except ImportError:
        return False
    return True


BACKENDS = {"torch": search_torch, "faiss": search_faiss}


def search(queries: torch.Tensor, vectors: torch.Tensor, k: int, metric: str = "euclidean", backend: str = "auto"):
    """Dispatch to a backend; ``auto`` is faiss where it is installed, torch otherwise."""
    if backend == "auto":
        backend = "faiss" if faiss_available() else "torch"
    if backend not in BACKENDS:
        raise ConfigError("backend", f"unknown backend {backend!r}; allowed: auto, {', '.join(BACKENDS)}")
    return BACKENDS[backend](queries, vectors, k, metric)

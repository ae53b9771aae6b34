"""Clustering quality of an embedding: NMI and AMI after k-means (Musgrave et al. 2020, §3.2).

k-means with as many clusters as distinct labels and a fixed seed, then sklearn's
``normalized_mutual_info_score`` (NMI = 2 I(Y;C) / (H(Y) + H(C)), Musgrave et al., ECCV 2020)
and ``adjusted_mutual_info_score``. Backends: "sklearn" (``KMeans(n_init=1,
random_state=seed)``, k-means++) or "faiss" (``faiss.Kmeans(niter=20, seed=seed)``,
pytorch-metric-learning's choice); their NMI differ slightly, so compare within one backend.
"""

from __future__ import annotations

import numpy as np
import torch

from gspdml.errors import ConfigError, import_optional
from gspdml.evaluation.metric_registry import METRICS, metrics_of_kind
from gspdml.evaluation.results import Embeddings, LabelsLike

_BACKENDS = ("sklearn", "faiss")


def kmeans_assignments(
    embeddings: Embeddings, num_clusters: int, *, backend: str = "sklearn", seed: int = 0
) -> np.ndarray:
    """Cluster index (int64 [N]) of each embedding after k-means with a fixed seed (k-means
    runs in float32: float16 and bfloat16 embeddings, which numpy lacks, are widened exactly)."""
    x = np.ascontiguousarray(torch.as_tensor(embeddings).detach().cpu().float().numpy())
    if backend == "sklearn":
        from sklearn.cluster import KMeans

        kmeans = KMeans(n_clusters=num_clusters, n_init=1, random_state=seed)
        assignments: np.ndarray = kmeans.fit_predict(x)
        return assignments.astype(np.int64)
    if backend == "faiss":
        faiss = import_optional(
            "faiss",
            "kmeans_backend",
            "'faiss' needs faiss; install the extra: pip install gspdml[faiss]",
        )
        km = faiss.Kmeans(x.shape[1], num_clusters, niter=20, seed=seed, verbose=False)
        km.train(x)
        nearest: np.ndarray = km.index.search(x, 1)[1][:, 0]
        return nearest.astype(np.int64)
    raise ConfigError(
        "kmeans_backend", f"unknown k-means backend {backend!r}; allowed: {list(_BACKENDS)}"
    )


def clustering_scores(
    embeddings: Embeddings, labels: LabelsLike, *, backend: str = "sklearn", seed: int = 0
) -> dict[str, float]:
    """Every registered clustering metric (``{"nmi": ..., "ami": ...}``) of one k-means (one
    cluster per distinct label) against ``labels``."""
    truth = np.asarray(labels)
    clusters = kmeans_assignments(embeddings, len(np.unique(truth)), backend=backend, seed=seed)
    return {name: METRICS[name].score(truth, clusters) for name in metrics_of_kind("clustering")}

"""Embedding-geometry metrics of Gürbüz thesis Fig. 3.2-3.3 (CCP; §3.3.1).

* Average covering radius of a class with ``n`` samples: for ``k = 1..n`` the greedy k-center
  (farthest-first traversal, :func:`~gspdml.ops.kcenter.greedy_k_center`) chooses ``k``
  centres and ``r_k = max_x min_{c in centres} ||x - c||_2``; the class value is the mean of
  ``r_1..r_n`` and the reported value the mean over classes. Farthest-first is incremental,
  so the first ``k`` centres of one traversal are the greedy ``k``-center solution.
* Mean inter-class distance ``E ||x - x^-||_2`` over all pairs of samples of different classes.
"""

from __future__ import annotations

import torch

from gspdml.ops.kcenter import greedy_k_center


def covering_radii(points: torch.Tensor) -> torch.Tensor:
    """``[r_1, ..., r_n]``: the covering radius of the first ``k`` greedy k-center centres of
    ``points`` ``[n, d]`` (traversal from index 0), for every ``k``."""
    order = greedy_k_center(points, points.shape[0])
    distances = torch.cdist(points, points[order])  # [n, n], column k = distance to centre k
    return distances.cummin(dim=1).values.amax(dim=0)


def average_covering_radius(embeddings: torch.Tensor, labels: torch.Tensor) -> float:
    """Mean over classes of the mean of ``r_k`` over ``k = 1..n_c`` (Gürbüz thesis §3.3.1)."""
    embeddings, labels = embeddings.detach(), torch.as_tensor(labels)
    per_class = [covering_radii(embeddings[labels == c]).mean() for c in torch.unique(labels)]
    return float(torch.stack(per_class).mean())


def mean_inter_class_distance(
    embeddings: torch.Tensor, labels: torch.Tensor, chunk: int = 4096
) -> float:
    """``E ||x - x^-||_2`` over all ordered pairs with different labels (computed in row chunks)."""
    embeddings, labels = embeddings.detach(), torch.as_tensor(labels)
    total, count = embeddings.new_zeros((), dtype=torch.float64), 0
    for start in range(0, len(labels), chunk):
        rows, row_labels = embeddings[start : start + chunk], labels[start : start + chunk]
        negative = row_labels[:, None] != labels[None, :]
        total += torch.cdist(rows, embeddings)[negative].double().sum()
        count += int(negative.sum())
    if count == 0:
        raise ValueError("the mean inter-class distance needs at least two classes")
    return float(total / count)

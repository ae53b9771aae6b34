"""Greedy k-center (farthest-first traversal), Gürbüz thesis Algorithm 2 and Gonzalez (1985).

Used for GSP prototype initialisation (:mod:`gspdml.pooling.gsp.layer`), CCP proxy
re-initialisation (:mod:`gspdml.losses.ccp_selection`) and the GAP analysis.
"""

from __future__ import annotations

from typing import Optional

import torch


def greedy_k_center(
    points: torch.Tensor, k: int, initial_centers: Optional[torch.Tensor] = None, first: int = 0
) -> torch.Tensor:
    """Indices of ``k`` points chosen farthest-first: each step picks ``argmax_u min_{v in centres}
    ||u - v||_2`` over the points not yet chosen, the centres being ``initial_centers`` (e.g. CCP's
    converged proxies, fixed and not returned) plus the points chosen so far; without them the
    traversal starts at index ``first``. A 2-approximation of the optimal k-center covering radius;
    ties go to the lowest index.

    Args:
        points: ``[N, d]``; ``k <= N``.
        initial_centers: ``[M, d]`` centres already placed, or None.
    Returns:
        int64 indices ``[k]`` in selection order.
    """
    n = points.shape[0]
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, {n}], got {k}")
    chosen = torch.empty(k, dtype=torch.long)
    if k == 0:
        return chosen
    points = points.detach()
    nearest = torch.full((n,), float("inf"), dtype=points.dtype, device=points.device)
    if initial_centers is not None and len(initial_centers):
        nearest = torch.cdist(points, initial_centers.detach().to(points)).amin(dim=1)
        start = 0
    else:
        chosen[0] = first
        nearest = torch.cdist(points, points[first : first + 1]).squeeze(1)
        start = 1
    for i in range(start, k):
        if i > 0:
            nearest[chosen[:i]] = -1.0  # never pick a chosen point twice
        idx = int(torch.argmax(nearest))
        chosen[i] = idx
        nearest = torch.minimum(nearest, torch.cdist(points, points[idx : idx + 1]).squeeze(1))
    return chosen


def covering_radius(points: torch.Tensor, centers: torch.Tensor) -> float:
    """``max_x min_c ||x - c||_2``: the radius within which the centres cover the points."""
    return float(torch.cdist(points.detach(), centers.detach().to(points)).amin(dim=1).max())

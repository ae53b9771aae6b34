"""Planar convex hulls of class point sets (active prototypes, Gürbüz thesis Fig. 4.3; GSP token
study, Fig. 5.4) and whether two hulls overlap.

``convex_hull_2d`` is Andrew's monotone chain (counter-clockwise, collinear points dropped).
Two compact convex sets are disjoint iff some axis separates their projections; for polygons
(points and segments included) the axis can be taken among the edge normals of either hull
and the differences of their vertices (the direction between the closest points), which is
what ``hulls_overlap`` checks.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def _cross(o: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    return float((a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]))


def convex_hull_2d(points: npt.ArrayLike) -> np.ndarray:
    """Indices of the hull vertices of ``points`` ``[N, 2]`` in counter-clockwise order, starting
    at the lowest-x (then lowest-y) point. One point (or identical points) gives one index, a
    collinear set its two extreme points."""
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) == 0:
        raise ValueError(f"expected a non-empty [N, 2] array, got shape {pts.shape}")
    order = np.lexsort((pts[:, 1], pts[:, 0]))
    unique = [order[0]] + [
        i for prev, i in zip(order, order[1:]) if not np.array_equal(pts[i], pts[prev])
    ]
    if len(unique) < 3:
        return np.array(unique, dtype=np.int64)

    def chain(indices: list[int]) -> list[int]:
        out: list[int] = []
        for i in indices:
            while len(out) >= 2 and _cross(pts[out[-2]], pts[out[-1]], pts[i]) <= 0:
                out.pop()
            out.append(i)
        return out

    lower, upper = chain(unique), chain(unique[::-1])
    return np.array(lower[:-1] + upper[:-1], dtype=np.int64)


def hulls_overlap(first: npt.ArrayLike, second: npt.ArrayLike, tol: float = 1e-12) -> bool:
    """Whether the convex hulls of two planar point sets intersect (touching counts)."""
    a = np.asarray(first, dtype=np.float64)[convex_hull_2d(first)]
    b = np.asarray(second, dtype=np.float64)[convex_hull_2d(second)]
    normals = [(b[None, :, :] - a[:, None, :]).reshape(-1, 2)]
    for hull in (a, b):
        if len(hull) >= 2:
            edges = np.roll(hull, -1, axis=0) - hull
            normals.append(np.stack([-edges[:, 1], edges[:, 0]], axis=1))
    axes = np.concatenate(normals)
    axes = axes[np.linalg.norm(axes, axis=1) > 0]
    if len(axes) == 0:  # both hulls are the same single point
        return True
    pa, pb = a @ axes.T, b @ axes.T
    separated = (pa.max(axis=0) < pb.min(axis=0) - tol) | (pb.max(axis=0) < pa.min(axis=0) - tol)
    return not bool(separated.any())


def overlap_fraction(groups: list[np.ndarray]) -> float:
    """Fraction of unordered pairs of point sets whose convex hulls overlap."""
    pairs = [(i, j) for i in range(len(groups)) for j in range(i + 1, len(groups))]
    if not pairs:
        raise ValueError("need at least two point sets")
    return sum(hulls_overlap(groups[i], groups[j]) for i, j in pairs) / len(pairs)

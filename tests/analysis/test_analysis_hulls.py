"""Planar convex hulls and hull overlap vs scipy.spatial.ConvexHull and an LP feasibility check."""

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.spatial import ConvexHull

from gspdml.analysis.hulls import convex_hull_2d, hulls_overlap, overlap_fraction


def test_hull_vertices_match_scipy():
    rng = np.random.default_rng(0)
    for n in (3, 5, 20, 200):
        pts = rng.normal(size=(n, 2))
        ours, ref = convex_hull_2d(pts), ConvexHull(pts)
        assert set(ours.tolist()) == set(ref.vertices.tolist())
        hull = pts[ours]  # counter-clockwise: every turn is a left turn
        a, b, c = hull, np.roll(hull, -1, 0), np.roll(hull, -2, 0)
        assert (((b - a)[:, 0] * (c - b)[:, 1] - (b - a)[:, 1] * (c - b)[:, 0]) > 0).all()


def test_degenerate_hulls():
    assert convex_hull_2d([[1.0, 1.0], [1.0, 1.0]]).tolist() == [0]
    assert sorted(convex_hull_2d([[0, 0], [1, 1], [2, 2], [0.5, 0.5]]).tolist()) == [0, 2]
    with pytest.raises(ValueError, match=r"\[N, 2\]"):
        convex_hull_2d(np.zeros((3, 3)))


def _lp_intersect(a: np.ndarray, b: np.ndarray) -> bool:
    """Is there a point x = A^T u = B^T w with u, w in simplices? (LP feasibility)."""
    na, nb = len(a), len(b)
    eq = np.zeros((4, na + nb))
    eq[0:2, :na], eq[0:2, na:] = a.T, -b.T
    eq[2, :na], eq[3, na:] = 1.0, 1.0
    res = linprog(np.zeros(na + nb), A_eq=eq, b_eq=[0, 0, 1, 1], bounds=(0, None), method="highs")
    return res.status == 0


def test_overlap_against_lp_feasibility():
    rng = np.random.default_rng(1)
    outcomes = set()
    for _ in range(150):
        sizes = rng.integers(1, 6, size=2)
        a = rng.normal(size=(sizes[0], 2))
        b = rng.normal(size=(sizes[1], 2)) + rng.normal(scale=2.0, size=2)
        expected = _lp_intersect(a, b)
        assert hulls_overlap(a, b) == expected
        outcomes.add(expected)
    assert outcomes == {True, False}


def test_collinear_and_point_cases():
    assert not hulls_overlap([[0, 0], [1, 0]], [[2, 0], [3, 0]])  # collinear, disjoint segments
    assert hulls_overlap([[0, 0], [2, 0]], [[1, -1], [1, 1]])  # crossing segments
    assert hulls_overlap([[0.5, 0.5]], [[0, 0], [1, 0], [0, 1], [1, 1]])
    assert not hulls_overlap([[0.0, 0.0]], [[0.0, 1.0]])
    assert overlap_fraction([[[0, 0], [1, 1]], [[1, 0], [0, 1]], [[5, 5]]]) == pytest.approx(1 / 3)

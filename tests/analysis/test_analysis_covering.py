"""Average covering radius and mean inter-class distance (Gürbüz thesis §3.3.1) vs python loops."""

import itertools
import math

import pytest
import torch

from gspdml.analysis.covering import (
    average_covering_radius,
    covering_radii,
    mean_inter_class_distance,
)


def _greedy_radius(points: list, k: int) -> float:
    """Farthest-first from index 0 re-run for each k, then the covering radius, in plain python."""
    centres = [0]
    while len(centres) < k:
        far = max(
            (i for i in range(len(points)) if i not in centres),
            key=lambda i: (min(math.dist(points[i], points[c]) for c in centres), -i),
        )
        centres.append(far)
    return max(min(math.dist(p, points[c]) for c in centres) for p in points)


def test_covering_radii_against_rerun_greedy():
    points = torch.rand(9, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    radii = covering_radii(points)
    expected = [_greedy_radius(points.tolist(), k) for k in range(1, 10)]
    assert radii.tolist() == pytest.approx(expected, abs=1e-12)
    assert radii[-1] == 0.0 and (radii[1:] <= radii[:-1] + 1e-15).all()


def test_average_covering_radius_is_the_class_mean_of_mean_radii():
    gen = torch.Generator().manual_seed(1)
    emb = torch.randn(15, 3, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0] * 4 + [1] * 6 + [2] * 5)
    per_class = []
    for c in range(3):
        pts = emb[labels == c].tolist()
        per_class.append(sum(_greedy_radius(pts, k) for k in range(1, len(pts) + 1)) / len(pts))
    assert average_covering_radius(emb, labels) == pytest.approx(sum(per_class) / 3, abs=1e-12)


def test_mean_inter_class_distance_against_pair_loop():
    gen = torch.Generator().manual_seed(2)
    emb = torch.randn(11, 2, generator=gen, dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, 0, 1, 1, 2, 0, 0, 2, 1])
    pairs = [
        math.dist(emb[i].tolist(), emb[j].tolist())
        for i, j in itertools.product(range(11), repeat=2)
        if labels[i] != labels[j]
    ]
    expected = sum(pairs) / len(pairs)
    assert mean_inter_class_distance(emb, labels) == pytest.approx(expected, abs=1e-12)
    assert mean_inter_class_distance(emb, labels, chunk=3) == pytest.approx(expected, abs=1e-12)


def test_single_class_has_no_inter_class_distance():
    with pytest.raises(ValueError, match="two classes"):
        mean_inter_class_distance(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long))

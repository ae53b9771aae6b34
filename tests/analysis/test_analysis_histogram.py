"""Histogram operator, PCC and the PCC-GAP bound (Gürbüz thesis Eq. 4.2.5-4.2.6, Prop. 4.2.1)."""

import numpy as np
import ot
import pytest
import torch
from scipy.optimize import linprog

from gspdml.analysis.histogram import (
    active_prototypes,
    histogram_operator,
    nearest_prototype,
    pcc_embedding,
)
from gspdml.ops.kcenter import covering_radius, greedy_k_center


def _lp_histogram(features: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """Eq. 4.2.5 solved as a linear programme over pi [m, n] (p is its row sum)."""
    m, n = len(prototypes), len(features)
    cost = np.linalg.norm(prototypes[:, None, :] - features[None, :, :], axis=2)
    columns = np.zeros((n, m * n))
    for j in range(n):
        columns[j, j::n] = 1.0  # sum_i pi_ij = 1/n
    result = linprog(
        cost.ravel(), A_eq=columns, b_eq=np.full(n, 1.0 / n), bounds=(0, None), method="highs"
    )
    assert result.status == 0
    return result.x.reshape(m, n).sum(axis=1)


def test_histogram_matches_the_linear_programme():
    rng = np.random.default_rng(0)
    for _ in range(5):
        features, prototypes = rng.normal(size=(20, 3)), rng.normal(size=(6, 3))
        p, plan = histogram_operator(torch.from_numpy(features), torch.from_numpy(prototypes))
        np.testing.assert_allclose(p.numpy(), _lp_histogram(features, prototypes), atol=1e-9)
        np.testing.assert_allclose(plan.sum(0).numpy(), np.full(20, 1 / 20), atol=1e-12)


def test_nearest_prototype_against_python_loop():
    rng = np.random.default_rng(1)
    features, prototypes = rng.normal(size=(2, 7, 2)), rng.normal(size=(5, 2))
    got = nearest_prototype(torch.from_numpy(features), torch.from_numpy(prototypes))
    for b in range(2):
        for j in range(7):
            dists = [np.linalg.norm(features[b, j] - v) for v in prototypes]
            assert got[b, j] == int(np.argmin(dists))


def test_pcc_gap_distance_bounded_by_covering_radius_and_ot():
    gen = torch.Generator().manual_seed(2)
    images = torch.randn(40, 16, 2, generator=gen, dtype=torch.float64)
    images = (
        images / images.norm(dim=-1, keepdim=True).clamp_min(1.0) * 0.99
    )  # inside the unit ball
    pooled = images.reshape(-1, 2)
    prototypes = pooled[greedy_k_center(pooled, 24)]
    delta = covering_radius(pooled, prototypes)
    gap, pcc = images.mean(dim=1), pcc_embedding(images, prototypes)
    gaps = (pcc - gap).norm(dim=1)
    assert (gaps <= delta + 1e-12).all()
    assert (gaps.pow(2) <= delta + 1e-12).all()  # the printed (squared) form of Prop. 4.2.1
    for b in range(
        5
    ):  # ||PCC - GAP|| <= W1((p*, V), (1/n, X)) (Kantorovich-Rubinstein with f linear)
        p, _ = histogram_operator(images[b], prototypes)
        cost = torch.cdist(prototypes, images[b]).numpy()
        w1 = ot.emd2(p.numpy(), np.full(16, 1 / 16), cost)
        assert gaps[b] <= w1 + 1e-9 <= delta + 1e-9


def test_active_prototypes_threshold():
    prototypes = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    features = torch.tensor([[[0.1, 0.0], [0.9, 0.1], [0.0, 0.05], [0.05, 0.0]]])
    assert active_prototypes(features, prototypes).tolist() == [True, True, False]
    assert active_prototypes(features, prototypes, threshold=0.5).tolist() == [True, False, False]


def test_channel_mismatch_is_reported():
    with pytest.raises(ValueError, match="channels"):
        nearest_prototype(torch.zeros(3, 2), torch.zeros(4, 3))

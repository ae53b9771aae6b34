"""Generalized max pooling against the primal ridge regression (Murray & Perronnin 2014)."""

import numpy as np
import torch

from gspdml.pooling import build_pooling


def test_gemax_equals_the_primal_ridge_solution():
    x = torch.randn(2, 6, 3, 3)  # C = 6, n = 9
    lam = 0.7
    out = build_pooling({"gemax": {"lam": lam}}, 6)(x)
    for i in range(2):
        phi = x[i].flatten(1).double().numpy()  # C x n
        xi = np.linalg.solve(phi @ phi.T + lam * np.eye(6), phi @ np.ones(9))
        np.testing.assert_allclose(out.vector[i].double().numpy(), xi, rtol=1e-4, atol=1e-5)
        alpha = out.weights[i].flatten().double().numpy()
        np.testing.assert_allclose(phi @ alpha, xi, rtol=1e-4, atol=1e-5)


def test_gemax_equalises_similarities_when_lambda_is_small():
    """With n <= C and lambda -> 0, Phi^T xi = 1: every local feature has similarity one with
    the pooled vector, however often it repeats (the point of GeMax)."""
    base = torch.randn(1, 32, 1, 3, dtype=torch.float64)
    repeated = torch.cat(
        [base[..., :1].expand(-1, -1, -1, 4), base[..., 1:]], dim=3
    )  # first feature x4
    out = build_pooling({"gemax": {"lam": 1e-9}}, 32)(repeated).vector
    similarities = repeated.flatten(2)[0].T @ out[0]
    np.testing.assert_allclose(similarities.numpy(), np.ones(6), atol=1e-6)

"""Closed-form ridge regression (problem (P3) of the GSP paper §4.3) against least squares."""

import numpy as np
import pytest
import torch

from gspdml.ops.ridge import ridge_fit


def lstsq_ridge(z: np.ndarray, t: np.ndarray, ridge: float) -> np.ndarray:
    """min ||Z A^T - T||^2 + ridge ||A||^2 as ordinary least squares on [Z; sqrt(ridge) I]."""
    m = z.shape[1]
    augmented = np.vstack([z, np.sqrt(ridge) * np.eye(m)])
    rhs = np.vstack([t, np.zeros((m, t.shape[1]))])
    return np.linalg.lstsq(augmented, rhs, rcond=None)[0]


@pytest.mark.parametrize("b,m", [(6, 10), (12, 4)])
def test_ridge_fit_equals_lstsq_and_both_inversions_agree(b, m):
    g = torch.Generator().manual_seed(b)
    z = torch.rand(b, m, generator=g, dtype=torch.float64)
    t = torch.randn(b, 5, generator=g, dtype=torch.float64)
    got = ridge_fit(z, t, 0.05)
    np.testing.assert_allclose(
        got.numpy(), lstsq_ridge(z.numpy(), t.numpy(), 0.05), rtol=1e-9, atol=1e-10
    )
    dual = z.T @ torch.linalg.inv(z @ z.T + 0.05 * torch.eye(b, dtype=torch.float64)) @ t
    primal = torch.linalg.inv(z.T @ z + 0.05 * torch.eye(m, dtype=torch.float64)) @ z.T @ t
    torch.testing.assert_close(dual, primal)
    torch.testing.assert_close(got, dual)

"""GeM and LSE: framework identities (Psomas thesis Eqs. 3.8-3.16) and limits to GAP and GMP."""

import math

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.pooling import build_pooling
from gspdml.pooling.functional import generalized_mean


def positive_map(seed=0):
    return torch.empty(2, 8, 7, 7).uniform_(0.1, 2.0, generator=torch.Generator().manual_seed(seed))


def test_gem_p1_is_gap_and_large_p_tends_to_gmp():
    x = positive_map()
    gap, gmp = x.mean(dim=(2, 3)), x.amax(dim=(2, 3))
    torch.testing.assert_close(
        build_pooling({"gem": {"p": 1.0}}, 8)(x).vector, gap, rtol=1e-5, atol=1e-6
    )
    large = build_pooling({"gem": {"p": 200.0}}, 8)(x).vector
    # (1/n)^(1/p) <= GeM / max <= 1: with n = 49, p = 200 the gap is at most 2 %
    assert (large <= gmp + 1e-5).all() and (large >= gmp * 49 ** (-1 / 200) - 1e-5).all()
    assert (large - gmp).abs().max() < (
        build_pooling({"gem": {"p": 10.0}}, 8)(x).vector - gmp
    ).abs().max()


def test_power_mean_identities_in_float64():
    x = positive_map().flatten(2).transpose(1, 2).double()  # [B, n, C]
    torch.testing.assert_close(
        generalized_mean(x, 2.0).double(), x.pow(2).mean(1).sqrt(), rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(
        generalized_mean(x, -1.0).double(), 1 / (1 / x).mean(1), rtol=1e-5, atol=1e-6
    )
    geometric = x.log().mean(1).exp()
    torch.testing.assert_close(generalized_mean(x, 1e-4).double(), geometric, rtol=1e-3, atol=1e-4)


def test_gem_learns_p_and_rejects_bad_p():
    pool = build_pooling("gem", 8)
    assert pool.p.requires_grad and pool.p.item() == 3.0
    assert not build_pooling({"gem": {"learn_p": False}}, 8).p.requires_grad
    with pytest.raises(ConfigError, match="model.pooling.p"):
        build_pooling({"gem": {"p": -1}}, 8)


def test_gem_gradient_wrt_p_matches_finite_differences():
    x = positive_map()
    pool = build_pooling({"gem": {"p": 2.5}}, 8)
    pool(x).vector.sum().backward()
    h = 1e-3
    with torch.no_grad():
        up = generalized_mean(x.flatten(2).transpose(1, 2).double(), 2.5 + h).sum()
        down = generalized_mean(x.flatten(2).transpose(1, 2).double(), 2.5 - h).sum()
    assert math.isclose(float(pool.p.grad), float((up - down) / (2 * h)), rel_tol=1e-3)


def test_lse_matches_its_formula_and_limits():
    x = torch.randn(2, 5, 4, 4, dtype=torch.float64)
    flat = x.flatten(2)
    for r in (0.5, 3.0):
        expected = torch.log(torch.exp(r * flat).mean(dim=2)) / r  # Eq. 3.15, direct
        pooled = build_pooling({"lse": {"r": r}}, 5)(x).vector
        torch.testing.assert_close(pooled.double(), expected, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        build_pooling({"lse": {"r": 1e-4}}, 5)(x).vector.double(),
        flat.mean(2),
        rtol=1e-3,
        atol=1e-3,
    )
    sharp = build_pooling({"lse": {"r": 1e4}}, 5)(x).vector.double()  # no overflow: stable form
    torch.testing.assert_close(sharp, flat.amax(2), rtol=0, atol=math.log(16) / 1e4 + 1e-6)

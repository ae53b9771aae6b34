"""GAP+GMP, global k-max and WELDON against brute-force definitions (ProxyNCA++ paper Eq. 7)."""

import itertools

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.pooling import build_pooling


def brute_force_k_max(values, k):
    """``max_h (1/k) sum_i h_i g_i`` over every binary ``h`` with ``sum h = k`` (ProxyNCA++ paper Eq. 7)."""
    b, n, c = values.shape
    out = torch.empty(b, c, dtype=torch.float64)
    for i in range(b):
        for j in range(c):
            out[i, j] = max(
                sum(float(values[i, s, j]) for s in subset) / k
                for subset in itertools.combinations(range(n), k)
            )
    return out


def test_kmax_matches_the_combinatorial_definition():
    x = torch.randn(2, 5, 2, 3)  # n = 6
    tokens = x.flatten(2).transpose(1, 2)
    for k in (1, 2, 4):
        pooled = build_pooling({"name": "kmax", "k": k}, in_channels=5)(x).vector
        torch.testing.assert_close(
            pooled.double(), brute_force_k_max(tokens, k), rtol=1e-6, atol=1e-6
        )


def test_kmax_limits_are_gmp_and_gap():
    x = torch.randn(3, 7, 4, 4)
    gap, gmp = build_pooling("gap", 7)(x).vector, build_pooling("gmp", 7)(x).vector
    torch.testing.assert_close(build_pooling({"kmax": {"k": 1}}, 7)(x).vector, gmp)
    torch.testing.assert_close(build_pooling({"kmax": {"k": 16}}, 7)(x).vector, gap)


def test_kmax_rejects_bad_k():
    with pytest.raises(ConfigError, match="model.pooling.k"):
        build_pooling({"kmax": {"k": 0}}, 7)
    with pytest.raises(ValueError, match="exceeds the number of locations"):
        build_pooling({"kmax": {"k": 17}}, 7)(torch.randn(1, 7, 4, 4))


def test_weldon_is_top_mean_plus_bottom_mean():
    x = torch.randn(2, 5, 2, 3)
    tokens = x.flatten(2).transpose(1, 2)
    pooled = build_pooling({"weldon": {"k_max": 2, "k_min": 3}}, 5)(x).vector
    bottom = -brute_force_k_max(-tokens, 3)
    torch.testing.assert_close(
        pooled.double(), brute_force_k_max(tokens, 2) + bottom, rtol=1e-6, atol=1e-6
    )
    only_top = build_pooling({"weldon": {"k_max": 2, "k_min": 0}}, 5)(x).vector
    torch.testing.assert_close(
        only_top.double(), brute_force_k_max(tokens, 2), rtol=1e-6, atol=1e-6
    )


def test_gap_gmp_is_the_scaled_sum():
    x = torch.randn(2, 4, 3, 3)
    expected = x.mean(dim=(2, 3)) + x.amax(dim=(2, 3))
    torch.testing.assert_close(build_pooling("gap_gmp", 4)(x).vector, expected)
    torch.testing.assert_close(
        build_pooling({"gap_gmp": {"scale": 0.5}}, 4)(x).vector, 0.5 * expected
    )

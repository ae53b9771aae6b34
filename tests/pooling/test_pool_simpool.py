"""SimPool against the numpy reference of the Psomas thesis Algorithm 2 and its identities."""

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.pooling import build_pooling


def layernorm(X, eps=1e-6):
    mu = X.mean(-1, keepdims=True)
    var = X.var(-1, keepdims=True)
    return (X - mu) / np.sqrt(var + eps)


def reference_simpool(X, WQ, WK, gamma=2.0, eps=1e-6):
    """Algorithm 2 for one image, tokens as rows (written independently in numpy)."""
    p, d = X.shape
    u0 = X.mean(0)
    Xn = layernorm(X)
    q = WQ @ u0
    s = Xn @ WK.T @ q / np.sqrt(d)
    a = np.exp(s - s.max())
    a /= a.sum()
    if gamma is None:
        return a @ Xn, a
    V = Xn - Xn.min() + eps
    return (a @ V**gamma) ** (1.0 / gamma), a


def spec_inputs():
    rng = np.random.default_rng(0)
    p, d = 49, 8
    X = rng.standard_normal((p, d))
    WQ = 0.1 * rng.standard_normal((d, d))
    WK = 0.1 * rng.standard_normal((d, d))
    return X, WQ, WK


def simpool_with(WQ, WK, **options):
    pool = build_pooling({"simpool": options}, in_channels=WQ.shape[0]).double()
    with torch.no_grad():
        pool.wq.weight.copy_(torch.from_numpy(WQ))
        pool.wk.weight.copy_(torch.from_numpy(WK))
    return pool


@pytest.mark.parametrize("gamma", [2.0, 1.25, None])
def test_simpool_matches_the_numpy_reference(gamma):
    X, WQ, WK = spec_inputs()
    with torch.no_grad():
        out = simpool_with(WQ, WK, gamma=gamma)(torch.from_numpy(X)[None])
    expected, attention = reference_simpool(X, WQ, WK, gamma)
    np.testing.assert_allclose(out.vector[0].numpy(), expected, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(out.weights[0].numpy(), attention, rtol=1e-10, atol=1e-14)


def test_numpy_reference_reproduces_the_spec_numbers():
    """Guards the reference itself against the numbers recorded from it."""
    X, WQ, WK = spec_inputs()
    u, a = reference_simpool(X, WQ, WK, 2.0)
    np.testing.assert_allclose(
        u,
        [2.727704, 2.686507, 2.484332, 2.699025, 2.56354, 2.670564, 2.557511, 2.811297],
        atol=1e-6,
    )
    assert np.argmax(a) == 23 and abs(a.max() - 0.020878) < 1e-6
    u_none, _ = reference_simpool(X, WQ, WK, None)
    np.testing.assert_allclose(
        u_none,
        [0.119758, 0.06229, -0.152436, -0.013717, -0.13027, 0.04557, -0.095523, 0.164328],
        atol=1e-6,
    )


@pytest.mark.parametrize("gamma", [2.0, 1.25])
def test_uniform_attention_is_the_gem_style_mean(gamma):
    """W_Q = 0 gives a = 1_p / p, so SimPool reduces to the power mean of the shifted values
    (Algorithm 2: sqrt(mean((LN(X) - min + eps)^2)) for gamma = 2)."""
    x = torch.randn(2, 8, 7, 7, dtype=torch.float64)
    d = 8
    out = simpool_with(
        np.zeros((d, d)), np.random.default_rng(1).standard_normal((d, d)), gamma=gamma
    )(x)
    torch.testing.assert_close(out.weights, torch.full((2, 7, 7), 1 / 49, dtype=torch.float64))
    tokens = torch.nn.functional.layer_norm(x.flatten(2).transpose(1, 2), (d,), eps=1e-6)
    shifted = tokens - tokens.amin(dim=(1, 2), keepdim=True) + 1e-6
    torch.testing.assert_close(out.vector, shifted.pow(gamma).mean(dim=1).pow(1 / gamma))
    gem = build_pooling({"gem": {"p": gamma}}, d)(shifted).vector  # GeM of the value tokens
    torch.testing.assert_close(out.vector, gem.double())


def test_batch_minimum_scope_makes_samples_depend_on_the_batch():
    x = torch.randn(3, 16, 4, 4, generator=torch.Generator().manual_seed(0))
    minima = torch.nn.functional.layer_norm(x.flatten(2).transpose(1, 2), (16,), eps=1e-6).amin(
        dim=(1, 2)
    )
    x = x[minima.argsort(descending=True)]  # sample 0 does not hold the batch minimum
    torch.manual_seed(0)
    per_sample = build_pooling("simpool", 16)
    torch.manual_seed(0)
    per_batch = build_pooling({"simpool": {"min_scope": "batch"}}, 16)
    torch.testing.assert_close(per_sample(x[:1]).vector, per_batch(x[:1]).vector)
    torch.testing.assert_close(per_sample(x).vector[0], per_sample(x[:1]).vector[0])
    assert not torch.allclose(per_batch(x).vector[0], per_batch(x[:1]).vector[0])


def test_beta_shift_and_options():
    torch.manual_seed(0)
    pool = build_pooling({"simpool": {"gamma": 1.25, "use_beta": True}}, 16)
    x = torch.randn(2, 10, 16)  # ViT tokens
    base = pool(x).vector
    with torch.no_grad():
        pool.beta.fill_(0.5)
    torch.testing.assert_close(pool(x).vector, base + 0.5)
    assert build_pooling("simpool", 16).beta is None
    with pytest.raises(ConfigError, match="model.pooling.min_scope"):
        build_pooling({"simpool": {"min_scope": "global"}}, 16)
    with pytest.raises(ConfigError, match="model.pooling.gamma"):
        build_pooling({"simpool": {"gamma": 0}}, 16)


def test_auto_gamma_is_1_25_on_vit_tokens_and_2_on_cnn_maps():
    X, WQ, WK = spec_inputs()
    pool = simpool_with(WQ, WK)  # gamma: auto (the default)
    tokens = torch.from_numpy(X)[None]  # [1, 49, 8]: a ViT's patch tokens
    grid = tokens.transpose(1, 2).reshape(1, 8, 7, 7)  # the same locations as a CNN map
    with torch.no_grad():
        on_tokens, on_map = pool(tokens).vector[0].numpy(), pool(grid).vector[0].numpy()
    np.testing.assert_allclose(on_tokens, reference_simpool(X, WQ, WK, 1.25)[0], rtol=1e-10)
    np.testing.assert_allclose(on_map, reference_simpool(X, WQ, WK, 2.0)[0], rtol=1e-10)
    with pytest.raises(ConfigError, match="gamma"):
        build_pooling({"simpool": {"gamma": "fixed"}}, in_channels=8)

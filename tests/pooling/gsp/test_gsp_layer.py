"""The GSP pooling layer (GSP paper Algorithm 2): weights, variants, k-center warm-up, state."""

import pytest
import torch
from torch import nn

from gspdml.errors import ConfigError
from gspdml.models.embedder import build_embedder
from gspdml.ops.kcenter import greedy_k_center
from gspdml.pooling import GSP, POOLINGS, build_pooling
from gspdml.pooling.gsp.transport import partial_transport


def features(b=4, d=8, h=3, w=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, d, h, w, generator=g)


def clip(u):
    return u / max(1.0, float(u.norm()))


@torch.no_grad()
def reference(layer: GSP, x: torch.Tensor):
    """Algorithm 2 written out with loops over prototypes and locations."""
    b, d, h, w = x.shape
    local = x.flatten(2).transpose(1, 2)  # [B, n, d]
    n = h * w
    cost = torch.zeros(b, layer.num_prototypes, n)
    for bi in range(b):
        for i in range(layer.num_prototypes):
            for j in range(n):
                cost[bi, i, j] = (clip(layer.prototypes[i]) - clip(local[bi, j])).norm()
    rho, pi = partial_transport(cost, layer.mu, layer.eps, layer.iters)
    p = (1.0 / n - rho) / layer.mu
    return (p[:, :, None] * local).sum(1), p.reshape(b, h, w), pi.sum(2) / layer.mu


def test_registered_and_matches_algorithm_2():
    layer = POOLINGS.build({"name": "gsp", "num_prototypes": 6, "init": "random"}, in_channels=8)
    x = features() * 0.7
    out = layer(x)
    vector, weights, attributes = reference(layer, x)
    torch.testing.assert_close(out.vector, vector, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.weights, weights, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(out.attributes, attributes, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(out.weights.sum((1, 2)), torch.ones(4))
    torch.testing.assert_close(out.attributes.sum(1), torch.ones(4))


def test_mu_one_is_gap():
    layer = GSP(8, num_prototypes=5, mu=1.0, init="random")
    x = features()
    torch.testing.assert_close(layer(x).vector, x.mean((2, 3)))


def test_tokens_input():
    layer = GSP(8, num_prototypes=5, init="random")
    tokens = features().flatten(2).transpose(1, 2)
    out = layer(tokens)
    assert out.vector.shape == (4, 8) and out.weights.shape == (4, 15)


def test_gem_max_and_background_variants():
    x = features().abs()
    base = GSP(8, num_prototypes=5, init="random")
    plain = base(x)
    n = 15
    gem = GSP(8, num_prototypes=5, gem_p=3.0, init="random")
    gem.load_state_dict(base.state_dict())
    scaled = (n * plain.weights.flatten(1))[:, :, None] * x.flatten(2).transpose(1, 2)
    torch.testing.assert_close(gem(x).vector, scaled.clamp_min(1e-6).pow(3).mean(1).pow(1 / 3))
    gmp = GSP(8, num_prototypes=5, add_max_pool=True, init="random")
    gmp.load_state_dict(base.state_dict())
    torch.testing.assert_close(gmp(x).vector, plain.vector + x.amax((2, 3)))
    bg = GSP(8, num_prototypes=5, weighting="background", init="random")
    bg.load_state_dict(base.state_dict())
    out = bg(x)
    # residual weights: rho / (1 - mu) = (1/n - mu p) / (1 - mu)
    torch.testing.assert_close(out.weights, (1 / n - 0.3 * plain.weights) / 0.7)
    torch.testing.assert_close(out.weights.sum((1, 2)), torch.ones(4))


def test_gradients_reach_prototypes_and_features():
    layer = GSP(8, num_prototypes=5, init="random")
    x = features().requires_grad_()
    out = layer(x)
    (out.vector.pow(2).sum() + (out.attributes * torch.arange(5.0)).sum()).backward()
    assert layer.prototypes.grad.abs().sum() > 0 and x.grad.abs().sum() > 0


def test_kcenter_warm_up_then_transport():
    layer = GSP(8, num_prototypes=4, memory_size=10)
    batches = [features(b=4, seed=s) for s in range(3)]
    gap = [b.mean((2, 3)) for b in batches]
    for step in range(2):  # 8 samples < 10: still GAP, zero attributes
        out = layer(batches[step])
        torch.testing.assert_close(out.vector, gap[step])
        assert torch.equal(out.attributes, torch.zeros(4, 4)) and not bool(layer.initialized)
    layer.eval()
    layer(batches[2])  # evaluation does not fill the memory
    assert int(layer.memory_filled) == 8
    layer.train()
    layer(batches[2])  # fills the last 2 slots, then k-center
    assert bool(layer.initialized) and int(layer.memory_filled) == 10
    memory = torch.cat([gap[0], gap[1], gap[2][:2]])
    memory = memory / memory.norm(dim=1, keepdim=True).clamp_min(1.0)
    torch.testing.assert_close(layer.memory, memory)
    # the first m = 4 samples are the initial centres, the prototypes come from the other 6 (the
    # authors' initialize_support_kernel; tests/parity/test_gsp_tf_step.py runs it)
    rest = memory[4:]
    chosen = greedy_k_center(rest, 4, initial_centers=memory[:4])
    torch.testing.assert_close(layer.prototypes.data, rest[chosen])
    out = layer(batches[2])
    assert not torch.allclose(out.vector, gap[2])
    torch.testing.assert_close(out.attributes.sum(1), torch.ones(4))


def test_prototypes_updated_in_place_for_an_existing_optimizer():
    layer = GSP(8, num_prototypes=2, memory_size=2)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    layer(features(b=2))
    assert bool(layer.initialized)
    out = layer(features(b=2, seed=1))
    before = layer.prototypes.detach().clone()
    out.vector.sum().backward()
    optimizer.step()
    assert not torch.equal(before, layer.prototypes.detach())


def test_state_dict_round_trip_keeps_the_warm_up_state():
    layer = GSP(8, num_prototypes=3, memory_size=6)
    layer(features(b=4))
    clone = GSP(8, num_prototypes=3, memory_size=6)
    clone.load_state_dict(layer.state_dict())
    assert int(clone.memory_filled) == 4 and not bool(clone.initialized)
    x = features(b=4, seed=1)
    layer(x), clone(x)
    assert bool(layer.initialized) and bool(clone.initialized)
    torch.testing.assert_close(layer.prototypes, clone.prototypes)
    fresh = GSP(8, num_prototypes=3, memory_size=6)
    fresh.load_state_dict(layer.state_dict())
    fresh.eval(), layer.eval()
    torch.testing.assert_close(fresh(x).vector, layer(x).vector)


def test_works_in_the_embedder_under_bf16_autocast():
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn"},
            "embedding_dim": 16,
            "pooling": {"name": "gsp", "num_prototypes": 4, "init": "random"},
        },
        in_channels=3,
    )
    images = torch.randn(2, 3, 32, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(images)
    assert out.weights.shape == (2, 8, 8) and out.attributes.shape == (2, 4)
    out.embedding.sum().backward()
    assert torch.isfinite(model.pooling.prototypes.grad).all()


def test_bad_options():
    for kwargs, field in (
        ({"mu": 0.0}, "mu"),
        ({"eps": 0.0}, "eps"),
        ({"gem_p": 0.5}, "gem_p"),
        ({"weighting": "middle"}, "weighting"),
        ({"mu": 1.0, "weighting": "background"}, "weighting"),
        ({"init": "zeros"}, "init"),
        ({"memory_size": 3}, "memory_size"),
        ({"num_prototypes": 0}, "num_prototypes"),
    ):
        with pytest.raises(ConfigError, match=field):
            GSP(8, **{"num_prototypes": 4, **kwargs})
    with pytest.raises(ConfigError, match="model.pooling.gamma"):
        build_pooling({"name": "gsp", "gamma": 5.0}, in_channels=8)
    assert isinstance(GSP(8).prototypes, nn.Parameter)

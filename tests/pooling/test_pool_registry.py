"""Properties every registered pooling must have (parametrised over the registry, so a newly
registered pooling is tested automatically).

Class attributes read here (defaults in brackets): ``order_free`` [undeclared] - True: the
output does not depend on the order of the locations, False: it does (e.g. a spatial
convolution); an undeclared layer is only checked for a finite output; ``accepts_tokens`` [True] - ``[B, N, C]`` input is
accepted; ``weights_are_distribution`` [False] - ``Pooled.weights`` sums to one per sample.
"""

import pytest
import torch

from gspdml.models import build_embedder
from gspdml.pooling import POOLINGS, build_pooling

NAMES = POOLINGS.names()
C, H, W = 24, 5, 6
# Options for layers whose default starts with a warm-up in which some parameters are unused
# (GSP's k-center initialisation pools with GAP until its memory is full).
# SimPool's default gamma depends on the layout (1.25 on tokens, 2 on maps): fixed here so that a
# map and its tokens are the same input
OPTIONS = {"gsp": {"init": "random"}, "simpool": {"gamma": 2.0}}


def make(name, channels=C, seed=0):
    torch.manual_seed(seed)
    return build_pooling({"name": name, **OPTIONS.get(name, {})}, in_channels=channels)


def features(batch=3, seed=1):
    return torch.randn(batch, C, H, W, generator=torch.Generator().manual_seed(seed))


def attribute(pool, name, default):
    return getattr(type(pool), name, default)


@pytest.mark.parametrize("name", NAMES)
def test_output_shape_and_weights_shape(name):
    pool = make(name)
    out = pool(features())
    assert out.vector.shape == (3, pool.out_channels())
    assert torch.isfinite(out.vector).all()
    if out.weights is not None:
        assert out.weights.shape == (3, H, W)
        assert torch.isfinite(out.weights).all()


@pytest.mark.parametrize("name", NAMES)
def test_weights_sum_to_one_where_they_are_a_distribution(name):
    pool = make(name).eval()
    out = pool(features())
    if attribute(pool, "weights_are_distribution", False):
        assert out.weights is not None and (out.weights >= 0).all()
        torch.testing.assert_close(out.weights.sum(dim=(1, 2)), torch.ones(3), rtol=0, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_tokens_equal_the_flattened_map_or_are_refused(name):
    pool = make(name).eval()
    x = features()
    tokens = x.flatten(2).transpose(1, 2)
    if not attribute(pool, "accepts_tokens", True):
        with pytest.raises(ValueError, match="feature map"):
            pool(tokens)
        return
    from_map, from_tokens = pool(x), pool(tokens)
    torch.testing.assert_close(from_tokens.vector, from_map.vector, rtol=1e-5, atol=1e-5)
    if from_map.weights is not None:
        assert from_tokens.weights.shape == (3, H * W)
        torch.testing.assert_close(
            from_tokens.weights, from_map.weights.flatten(1), rtol=1e-5, atol=1e-6
        )


@pytest.mark.parametrize("name", NAMES)
def test_permutation_invariance_over_locations(name):
    pool = make(name).eval()
    x = features()
    perm = torch.randperm(H * W, generator=torch.Generator().manual_seed(5))
    shuffled = x.flatten(2)[:, :, perm].reshape_as(x)
    a, b = pool(x), pool(shuffled)
    invariant = torch.allclose(a.vector, b.vector, rtol=1e-4, atol=1e-5)
    declared = attribute(pool, "order_free", None)
    assert torch.isfinite(b.vector).all()
    if declared is not None:
        assert invariant == declared, f"{name}: order_free={declared} but invariance is {invariant}"
    if invariant and a.weights is not None:
        torch.testing.assert_close(
            b.weights.flatten(1), a.weights.flatten(1)[:, perm], rtol=1e-4, atol=1e-6
        )


@pytest.mark.parametrize("name", NAMES)
def test_gradients_reach_every_parameter_and_the_input(name):
    pool = make(name).train()
    x = features().requires_grad_(True)
    target = torch.randn(3, pool.out_channels(), generator=torch.Generator().manual_seed(2))
    out = pool(x)
    loss = (out.vector * target).sum()
    if out.weights is not None:
        loss = loss + (out.weights * torch.randn_like(out.weights)).sum()
    loss.backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    for pname, param in pool.named_parameters():
        if param.requires_grad:
            assert param.grad is not None and param.grad.abs().sum() > 0, (
                f"{name}: no gradient for {pname}"
            )


@pytest.mark.parametrize("name", NAMES)
def test_batch_independence(name):
    pool = make(name).eval()
    x = features(batch=4)
    full = pool(x).vector
    for i in (0, 3):
        alone = pool(x[i : i + 1]).vector
        torch.testing.assert_close(alone[0], full[i], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_initialisation(name):
    a, b, c = (make(name, seed=s).state_dict() for s in (0, 0, 1))
    assert all(torch.equal(a[k], b[k]) for k in a)
    matrices = [k for k, v in a.items() if v.dim() >= 2]
    if matrices:  # randomly initialised weights follow the seed
        assert any(not torch.equal(a[k], c[k]) for k in matrices)


@pytest.mark.parametrize("name", NAMES)
def test_bf16_autocast_is_finite_and_close_to_fp32(name):
    pool = make(name).eval()
    x = features()
    reference = pool(x).vector
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = pool(x.bfloat16())
    assert torch.isfinite(low.vector).all()
    error = (low.vector.float() - reference).norm() / reference.norm()
    assert error < 0.05, f"{name}: relative bf16 error {error:.3g}"
    if low.weights is not None:
        assert torch.isfinite(low.weights).all()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("embedding_dim", [32, None])
def test_every_pooling_works_in_the_embedder_with_and_without_head(name, embedding_dim):
    torch.manual_seed(0)
    model = build_embedder(
        {
            "backbone": {"name": "small_cnn", "widths": [8, 16, 16, 32]},
            "embedding_dim": embedding_dim,
            "pooling": {"name": name},
        },
        in_channels=3,
    ).eval()
    out = model(torch.rand(2, 3, 32, 32))
    assert out.embedding.shape == (2, model.embedding_dim)
    torch.testing.assert_close(out.embedding.norm(dim=1), torch.ones(2))
    if out.weights is not None:
        assert out.weights.shape == (2, 8, 8)

"""The fused GSP function (one autograd node) against autograd through the composed layer."""

import pytest
import torch

from gspdml.pooling import GSP
from gspdml.pooling.gsp.fused import cost_parts, fused_gsp
from gspdml.pooling.gsp.transport import partial_transport


def inputs(b=3, d=6, n=10, m=4, seed=0):
    """Features and prototypes with norms on both sides of 1 (the clip is active for some)."""
    g = torch.Generator().manual_seed(seed)
    local = torch.randn(b, d, n, generator=g, dtype=torch.float64)
    local = (
        local / local.norm(dim=1, keepdim=True) * torch.linspace(0.3, 2.0, n, dtype=torch.float64)
    )
    prototypes = torch.randn(m, d, generator=g, dtype=torch.float64)
    prototypes = (
        prototypes
        / prototypes.norm(dim=1, keepdim=True)
        * torch.linspace(0.5, 1.7, m, dtype=torch.float64)[:, None]
    )
    return local.requires_grad_(), prototypes.requires_grad_()


def composed(local, prototypes, mu, eps, background):
    """GSP written with plain autograd: explicit clip-normalisation, cdist-style costs, autograd
    through 400 unrolled transport iterations, weights, weighted sum and attributes."""

    def clip(u):
        return u / u.norm(dim=-1, keepdim=True).clamp_min(1.0)

    f, w = clip(local.transpose(1, 2)), clip(prototypes)  # [B, n, d], [m, d]
    cost = ((w[None, :, None, :] - f[:, None, :, :]).square().sum(-1) + 1e-12).sqrt()
    rho, pi = partial_transport(cost, mu, eps, iters=400, backward="unrolled")
    n = local.shape[2]
    weights = rho / (1 - mu) if background else (1.0 / n - rho) / mu
    return (local * weights[:, None, :]).sum(2), weights, pi.sum(2) / mu


@pytest.mark.parametrize("background", [False, True])
def test_values_and_gradients_equal_autograd_through_the_composed_layer(background):
    local, prototypes = inputs()
    g = torch.Generator().manual_seed(1)
    upstream = [
        torch.randn(3, 6, generator=g, dtype=torch.float64),
        torch.randn(3, 10, generator=g, dtype=torch.float64),
        torch.randn(3, 4, generator=g, dtype=torch.float64),
    ]
    results = []
    for function in (
        lambda *a: fused_gsp(*a, iters=400, background=background),
        lambda *a: composed(*a, background),
    ):
        outputs = function(local, prototypes, 0.3, 5.0)
        grads = torch.autograd.grad(
            sum((o * u).sum() for o, u in zip(outputs, upstream)), (local, prototypes)
        )
        results.append((outputs, grads))
    (fused_out, fused_grads), (ref_out, ref_grads) = results
    for a, b in zip(fused_out, ref_out):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)
    for a, b in zip(fused_grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-10)


@pytest.mark.parametrize(
    "mu,eps,background", [(0.3, 5.0, False), (0.6, 0.5, True), (0.2, 20.0, False)]
)
def test_gradcheck(mu, eps, background):
    local, prototypes = inputs(b=2, d=4, n=6, m=3, seed=2)
    assert torch.autograd.gradcheck(
        lambda x, w: fused_gsp(x, w, mu, eps, 1000, background), (local, prototypes)
    )


def test_a_feature_on_a_prototype_has_finite_gradients_equal_to_autograd():
    local, prototypes = inputs(seed=3)
    with torch.no_grad():
        local[0, :, 0] = prototypes[1]  # cost 0: the square root is smoothed, the square clamped
    for function in (
        lambda x, w: fused_gsp(x, w, 0.3, 5.0, 400),
        lambda x, w: composed(x, w, 0.3, 5.0, False),
    ):
        local.grad = prototypes.grad = None
        vector, _, attributes = function(local, prototypes)
        (vector.sum() + attributes.square().sum()).backward()
        assert torch.isfinite(local.grad).all() and torch.isfinite(prototypes.grad).all()
        if function.__code__.co_names[0] == "fused_gsp":
            fused = (local.grad.clone(), prototypes.grad.clone())
    torch.testing.assert_close(fused[0], local.grad, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(fused[1], prototypes.grad, rtol=1e-6, atol=1e-9)


def test_gsp_layer_trains_through_the_fused_function_with_the_gradient_of_the_unrolled_one():
    torch.manual_seed(0)
    x = (torch.randn(4, 8, 3, 5) * 0.5).requires_grad_()
    grads = {}
    for backward in ("closed_form", "unrolled"):
        torch.manual_seed(1)
        layer = GSP(8, num_prototypes=5, iters=300, init="random", backward=backward)
        x.grad = None
        out = layer(x)
        (
            out.vector.square().sum()
            + out.attributes.square().sum()
            + (out.weights * torch.arange(15.0).view(3, 5)).sum()
        ).backward()
        grads[backward] = (x.grad.clone(), layer.prototypes.grad.clone(), out.vector.detach())
    for a, b in zip(grads["closed_form"], grads["unrolled"]):
        torch.testing.assert_close(a, b, rtol=2e-4, atol=1e-6)


def test_mu_one_is_refused():
    local, prototypes = inputs()
    with pytest.raises(ValueError, match="mu = 1 is GAP"):
        fused_gsp(local, prototypes, 1.0, 5.0, 10)


def test_float32_features_on_prototypes_match_autograd_of_the_same_formula():
    """Where rounding makes the squared cost of a coincident pair negative, the clamp stops the
    gradient (as autograd of ``sqrt(clamp(s, 0) + 1e-12)`` does) instead of amplifying rounding
    noise by ``1 / (2 c) = 5e5``."""
    g = torch.Generator().manual_seed(4)
    prototypes = torch.randn(6, 32, generator=g) * 0.4
    local = torch.randn(4, 32, 12, generator=g) * 0.4
    local[:, :, :6] = prototypes.T  # coincident pairs; keep those whose square rounds below 0
    cost = cost_parts(prototypes, local)[0]
    clamped = cost == torch.tensor(1e-12).sqrt()
    near_but_not_clamped = (cost < 1e-3).any(dim=1) & ~clamped.any(
        dim=1
    )  # rounding noise either way
    local = torch.where(
        near_but_not_clamped[:, None, :], torch.randn(local.shape, generator=g) * 0.4, local
    )
    assert clamped.sum() >= 4 and (cost_parts(prototypes, local)[0] < 1e-3).sum() == clamped.sum()
    local.requires_grad_()
    prototypes.requires_grad_()
    upstream = torch.randn(4, 32, generator=g), torch.randn(4, 6, generator=g)
    grads = []
    for fused in (True, False):
        if fused:
            vector, _, attributes = fused_gsp(local, prototypes, 0.3, 5.0, 100)
        else:
            rho, pi = partial_transport(cost_parts(prototypes, local)[0], 0.3, 5.0, 100)
            weights = (1.0 / 12 - rho) / 0.3
            vector, attributes = (local * weights[:, None, :]).sum(2), pi.sum(2) / 0.3
        grads.append(
            torch.autograd.grad(
                (vector * upstream[0]).sum() + (attributes * upstream[1]).sum(), (local, prototypes)
            )
        )
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4 * float(b.abs().max()))


def test_feature_major_memory_layout_gives_the_same_results():
    """A channels_last map gives ``[B, d, n]`` features with ``d`` contiguous; the backward then
    builds the gradient in that layout, with the same values."""
    local, prototypes = inputs(b=3, d=6, n=10, m=4, seed=5)
    feature_major = local.detach().transpose(1, 2).contiguous().transpose(1, 2).requires_grad_()
    assert feature_major.stride(1) == 1 and torch.equal(feature_major, local)
    results = []
    for x in (local, feature_major):
        vector, weights, attributes = fused_gsp(x, prototypes, 0.3, 5.0, 200)
        grads = torch.autograd.grad(
            vector.square().sum() + attributes.square().sum() + weights[:, 0].sum(), (x, prototypes)
        )
        results.append((vector, *grads))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    assert results[1][1].stride(1) == 1  # the gradient keeps the layout of the features


@pytest.mark.parametrize("feature_major", [False, True])
def test_bf16_features_give_float32_outputs_and_bf16_gradient_products(feature_major):
    """bf16 features (an autocast network): costs, transport and outputs are float32 and equal the
    float32 run on the same values; the two backward products run in bf16 (as autocast runs every
    backward product), so the gradients agree with float32 to bf16 rounding, in the features'
    dtype and memory layout."""
    g = torch.Generator().manual_seed(6)
    values = (torch.randn(8, 10, 32, generator=g) * 0.3).bfloat16()  # [B, n, d]
    local = values.transpose(1, 2) if feature_major else values.transpose(1, 2).contiguous()
    prototypes = torch.randn(5, 32, generator=g) * 0.3
    upstream = (
        torch.randn(8, 32, generator=g),
        torch.randn(8, 10, generator=g),
        torch.randn(8, 5, generator=g),
    )
    results = []
    for x in (local, local.float()):
        x, w = x.detach().requires_grad_(), prototypes.clone().requires_grad_()
        outputs = fused_gsp(x, w, 0.3, 5.0, 100)
        grads = torch.autograd.grad(sum((o * u).sum() for o, u in zip(outputs, upstream)), (x, w))
        results.append((outputs, grads))
    (bf16_out, (bf16_local, bf16_proto)), (fp32_out, (fp32_local, fp32_proto)) = results
    for a, b in zip(bf16_out, fp32_out):
        assert a.dtype == torch.float32
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert bf16_local.dtype == torch.bfloat16 and bf16_proto.dtype == torch.float32
    assert (bf16_local.stride(1) == 1) == feature_major
    for a, b in ((bf16_local.float(), fp32_local), (bf16_proto, fp32_proto)):
        assert float((a - b).norm() / b.norm()) < 1e-2  # bf16 rounding gives about 3e-3

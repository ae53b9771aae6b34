"""Backward pass of the GSP partial transport: the closed form of the GSP paper Prop. 4.2 (corrected)."""

import pytest
import torch

from gspdml.pooling.gsp.transport import partial_transport


def plain_unrolled(cost, mu, eps, iters):
    """Prop. 4.1 written literally (K = exp(-eps c)), differentiated by autograd."""
    n = cost.shape[-1]
    kernel = torch.exp(-eps * cost)
    t = torch.ones(cost.shape[0], 1, dtype=cost.dtype)
    for _ in range(iters + 1):
        rho = (1.0 / n) / (1.0 + t * kernel.sum(1))
        t = mu / (kernel * rho[:, None, :]).sum((1, 2))[:, None]
    return rho, t[:, :, None] * kernel * rho[:, None, :]


def kkt_gradient(cost, mu, eps, grad_rho, grad_pi):
    """Implicit differentiation of the KKT system, with an explicit (n+1)x(n+1) solve.

    x = (rho, pi) = exp(-eps (c_bar + A^T lambda)) gives dx/dc = -eps (D - D A^T H^-1 A D),
    D = Diag(x), H = A D A^T (GSP paper App. A.3); here H is inverted numerically.
    """
    m, n = cost.shape
    rho, pi = partial_transport(cost, mu, eps, iters=500)
    x = torch.cat([rho, pi.reshape(-1)])
    a = torch.zeros(n + 1, n + m * n, dtype=cost.dtype)
    a[:n, :n] = torch.eye(n, dtype=cost.dtype)
    for i in range(m):
        a[:n, n + i * n : n + (i + 1) * n] = torch.eye(n, dtype=cost.dtype)
    a[n, n:] = 1.0
    d = torch.diag(x)
    jac = -eps * (d - d @ a.T @ torch.linalg.solve(a @ d @ a.T, a @ d))
    grad_x = torch.cat([grad_rho, grad_pi.reshape(-1)])
    return (jac @ grad_x)[n:].reshape(m, n)


def upstream(b, m, n, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, generator=g, dtype=torch.float64), torch.randn(
        b, m, n, generator=g, dtype=torch.float64
    )


@pytest.mark.parametrize("mu,eps", [(0.3, 5.0), (0.6, 0.5), (0.1, 20.0)])
def test_closed_form_equals_float64_autograd(mu, eps):
    g = torch.Generator().manual_seed(1)
    cost = torch.rand(2, 5, 12, generator=g, dtype=torch.float64) * 1.5
    g_rho, g_pi = upstream(2, 5, 12, seed=2)
    c1 = cost.clone().requires_grad_()
    rho, pi = partial_transport(c1, mu, eps, iters=100)
    ((rho * g_rho).sum() + (pi * g_pi).sum()).backward()
    c2 = cost.clone().requires_grad_()
    rho2, pi2 = plain_unrolled(c2, mu, eps, iters=600)
    ((rho2 * g_rho).sum() + (pi2 * g_pi).sum()).backward()
    torch.testing.assert_close(c1.grad, c2.grad, rtol=1e-7, atol=1e-10)


def test_closed_form_equals_kkt_implicit_differentiation():
    g = torch.Generator().manual_seed(5)
    cost = torch.rand(4, 7, generator=g, dtype=torch.float64) * 2.0
    g_rho, g_pi = upstream(1, 4, 7, seed=6)
    c = cost.clone().requires_grad_()
    rho, pi = partial_transport(c, 0.4, 3.0, iters=300)
    ((rho * g_rho[0]).sum() + (pi * g_pi[0]).sum()).backward()
    torch.testing.assert_close(
        c.grad, kkt_gradient(cost, 0.4, 3.0, g_rho[0], g_pi[0]), rtol=1e-8, atol=1e-11
    )


def test_unrolled_option_equals_closed_form():
    g = torch.Generator().manual_seed(7)
    cost = torch.rand(3, 6, 10, generator=g, dtype=torch.float64)
    grads = []
    for backward in ("closed_form", "unrolled"):
        c = cost.clone().requires_grad_()
        rho, pi = partial_transport(c, 0.3, 5.0, iters=200, backward=backward)
        (rho.sin().sum() + (pi * pi).sum()).backward()
        grads.append(c.grad)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-8, atol=1e-12)


def test_gradcheck():
    g = torch.Generator().manual_seed(3)
    cost = (torch.rand(1, 3, 4, generator=g, dtype=torch.float64) * 1.5).requires_grad_()
    assert torch.autograd.gradcheck(lambda c: partial_transport(c, 0.3, 5.0, iters=100), (cost,))
    assert torch.autograd.gradcheck(lambda c: partial_transport(c, 1.0, 5.0), (cost,))


def test_backward_memory_does_not_grow_with_iters():
    """The closed form keeps the given cost plus ``log rho [B, n]`` and ``log t [B, 1]``, whatever
    the number of iterations; no new ``[B, m, n]`` tensor. Autograd through the loop grows."""
    cost = torch.rand(2, 8, 20, requires_grad=True)

    def saved(iters, backward):
        """(elements of saved tensors that are not the input cost, whether the cost is saved)."""
        new, keeps_cost = [], False

        def pack(t):
            if t.untyped_storage().data_ptr() == cost.untyped_storage().data_ptr():
                nonlocal keeps_cost
                keeps_cost = True
            else:
                new.append(t.numel())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            partial_transport(cost, 0.3, 5.0, iters=iters, backward=backward)
        return sum(new), keeps_cost

    assert saved(10, "closed_form") == saved(200, "closed_form") == (2 * 20 + 2 * 1, True)
    assert saved(200, "unrolled")[0] > 10 * saved(10, "unrolled")[0] / 2


@pytest.mark.parametrize(
    "mu,eps", [(0.3, 100.0), (1.0, 5.0), (1.0, 100.0), (0.999, 5.0), (0.3, 1000.0)]
)
def test_gradients_finite_in_hard_regimes(mu, eps):
    g = torch.Generator().manual_seed(0)
    cost = (torch.rand(4, 16, 49, generator=g) * 2.0).requires_grad_()
    rho, pi = partial_transport(cost, mu, eps)
    (
        (rho * torch.linspace(-1, 1, 49)).sum() + (pi * pi.detach().sign()).sum() + pi.pow(2).sum()
    ).backward()
    assert (
        torch.isfinite(rho).all() and torch.isfinite(pi).all() and torch.isfinite(cost.grad).all()
    )


def test_bf16_autocast_runs_in_float32():
    g = torch.Generator().manual_seed(0)
    cost = (torch.rand(4, 16, 49, generator=g) * 2.0).requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low_precision = cost @ torch.eye(49)  # bf16 under autocast
        assert low_precision.dtype == torch.bfloat16
        rho, pi = partial_transport(low_precision, 0.3, 5.0)
        assert rho.dtype == torch.float32 and pi.dtype == torch.float32
        loss = (pi.sum(2) * torch.arange(16.0)).sum() + rho.pow(2).sum()
    loss.backward()
    assert torch.isfinite(cost.grad).all() and cost.grad.abs().sum() > 0
    ref_rho, _ = partial_transport(cost.detach(), 0.3, 5.0)
    torch.testing.assert_close(rho, ref_rho, rtol=2e-2, atol=1e-3)  # only the bf16 matmul differs

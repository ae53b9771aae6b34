"""Forward pass of the GSP partial transport (GSP paper Prop. 4.1, Claim 4.1, (P1)/(P2))."""

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from gspdml.errors import ConfigError
from gspdml.pooling.gsp import transport
from gspdml.pooling.gsp.transport import partial_transport, partial_transport_lp


def random_cost(b, m, n, seed=0, scale=1.5, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(b, m, n, generator=g, dtype=dtype) * scale


def linprog_p1(cost: np.ndarray, mu: float):
    """(P1) by scipy's HiGHS on variables [rho (n); pi row-major (m n)]."""
    m, n = cost.shape
    a_eq = np.zeros((n + 1, n + m * n))
    for j in range(n):
        a_eq[j, j] = 1.0
        a_eq[j, n + np.arange(m) * n + j] = 1.0
    a_eq[n, n:] = 1.0
    b_eq = np.r_[np.full(n, 1.0 / n), mu]
    res = linprog(
        np.r_[np.zeros(n), cost.ravel()], A_eq=a_eq, b_eq=b_eq, bounds=(0, None), method="highs"
    )
    assert res.status == 0
    return res.x[:n], res.x[n:].reshape(m, n), res.fun


@pytest.mark.parametrize("mu,eps", [(0.3, 5.0), (0.7, 0.5), (0.05, 20.0)])
def test_constraints_hold(mu, eps):
    cost = random_cost(3, 5, 12)
    rho, pi = partial_transport(cost, mu, eps, iters=100)
    n = cost.shape[-1]
    assert rho.shape == (3, 12) and pi.shape == (3, 5, 12)
    assert (rho >= 0).all() and (pi >= 0).all()
    torch.testing.assert_close(rho + pi.sum(1), torch.full_like(rho, 1.0 / n), rtol=0, atol=1e-12)
    torch.testing.assert_close(
        pi.sum((1, 2)), torch.full((3,), mu, dtype=torch.float64), rtol=0, atol=1e-12
    )
    weights = (1.0 / n - rho) / mu
    torch.testing.assert_close(weights.sum(1), torch.ones(3, dtype=torch.float64))


def test_matches_plain_domain_iteration():
    """The log-domain loop equals Prop. 4.1 written literally with K = exp(-eps c)."""
    cost, mu, eps, n = random_cost(2, 4, 9, seed=3), 0.3, 5.0, 9
    kernel = torch.exp(-eps * cost)
    t = torch.ones(2, 1, dtype=torch.float64)
    for _ in range(11):  # 10 iterations + the extra update
        rho = (1.0 / n) / (1.0 + t * kernel.sum(1))
        t = mu / (kernel * rho[:, None, :]).sum((1, 2))[:, None]
    pi = t[:, :, None] * kernel * rho[:, None, :]
    got_rho, got_pi = partial_transport(cost, mu, eps, iters=10)
    torch.testing.assert_close(got_rho, rho, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(got_pi, pi, rtol=1e-12, atol=1e-15)


def test_authors_reference_values():
    """Cross-check against the authors' code (github.com/yetigurbuz/generalized-sum-pooling; its TF and
    PyTorch versions agree)."""
    rs = np.random.RandomState(0)
    cost = torch.tensor(rs.uniform(0, 2, (2, 4, 3, 3))).reshape(2, 4, 9)
    rho, pi = partial_transport(cost, 0.3, 5.0, iters=100)
    plan = torch.cat([rho[:, None], pi], 1)
    expected = torch.tensor(
        [1.0450490e-01, 1.0409396e-03, 5.4403512e-03, 1.0505107e-04, 1.9872262e-05]
    )
    torch.testing.assert_close(plan[0, :, 0].float(), expected, rtol=1e-6, atol=1e-9)


def test_mu_one_is_gap_exactly():
    cost = random_cost(2, 6, 10)
    rho, pi = partial_transport(cost, 1.0, 5.0)
    assert torch.equal(rho, torch.zeros_like(rho))
    torch.testing.assert_close(pi.sum(1), torch.full_like(rho, 0.1))
    # and the mu -> 1 limit of the iteration approaches it (4e-4 at mu = 0.999)
    near_rho, near_pi = partial_transport(cost, 0.999, 5.0, iters=500)
    assert near_rho.max() < 1e-3
    torch.testing.assert_close(near_pi, pi, rtol=0, atol=5e-4)


def test_tiny_eps_gives_uniform_weights():
    cost = random_cost(1, 4, 12)
    rho, _ = partial_transport(cost, 0.3, 1e-8)
    torch.testing.assert_close(
        (1 / 12 - rho) / 0.3, torch.full_like(rho, 1 / 12), rtol=1e-7, atol=0
    )


def test_lp_closed_form_equals_linprog():
    cost = random_cost(4, 3, 10, seed=1)
    for b, mu in zip(range(4), (0.35, 0.5, 0.07, 0.93)):
        lp_rho, lp_pi, lp_value = linprog_p1(cost[b].numpy(), mu)
        rho, pi = partial_transport_lp(cost[b], mu)
        assert abs(float((cost[b] * pi).sum()) - lp_value) < 1e-12
        np.testing.assert_allclose(pi.numpy(), lp_pi, atol=1e-9)
        np.testing.assert_allclose(rho.numpy(), lp_rho, atol=1e-9)


def test_large_eps_approaches_lp():
    cost, mu = random_cost(1, 3, 10, seed=0)[0], 0.35
    _, lp_pi, lp_value = linprog_p1(cost.numpy(), mu)
    gaps, distances = [], []
    for eps, iters in (
        (1.0, 100),
        (10.0, 100),
        (100.0, 300),
        (1000.0, 1500),
    ):  # slower convergence as eps grows
        _, pi = partial_transport(cost, mu, eps, iters=iters)
        gaps.append(float((cost * pi).sum()) - lp_value)
        distances.append(float(np.abs(pi.numpy() - lp_pi).sum()))
    assert all(g >= -1e-9 for g in gaps)  # (P2)'s plan is feasible for (P1)
    assert gaps == sorted(gaps, reverse=True) and distances == sorted(distances, reverse=True)
    assert gaps[-1] < 1e-5 and distances[-1] < 1e-3


def test_large_eps_float32_is_finite():
    cost = random_cost(4, 8, 49, dtype=torch.float32) * 1.4  # up to 2.1 > 87/eps
    rho, pi = partial_transport(cost, 0.3, 100.0)
    assert torch.isfinite(rho).all() and torch.isfinite(pi).all()
    torch.testing.assert_close(pi.sum((1, 2)), torch.full((4,), 0.3), rtol=1e-5, atol=0)


def test_two_dimensional_cost_and_bad_arguments():
    cost = random_cost(1, 3, 5)
    rho, pi = partial_transport(cost[0], 0.3, 5.0)
    assert rho.shape == (5,) and pi.shape == (3, 5)
    for kwargs, field in (
        ({"mu": 0.0}, "mu"),
        ({"mu": 1.5}, "mu"),
        ({"eps": -1.0}, "eps"),
        ({"iters": -2}, "iters"),
    ):
        args = {"mu": 0.3, "eps": 5.0, "iters": 10, **kwargs}
        with pytest.raises(ConfigError, match=field):
            partial_transport(cost, **args)
    with pytest.raises(ConfigError, match="backward"):
        partial_transport(cost, 0.3, 5.0, backward="magic")


@pytest.mark.parametrize("mu,eps", [(0.3, 5.0), (0.3, 50.0), (0.9, 0.5), (0.999, 5.0)])
def test_early_stop_at_stationarity_matches_all_iterations(mu, eps):
    """The closed-form path may stop once log t is stationary; the full loop gives the same plan."""
    g = torch.Generator().manual_seed(4)
    cost = torch.rand(8, 16, 49, generator=g) * 2.0
    rho, pi = partial_transport(cost, mu, eps, iters=300)
    full_rho, full_pi = partial_transport(cost, mu, eps, iters=300, backward="unrolled")
    torch.testing.assert_close(rho, full_rho, rtol=1e-5, atol=1e-9)
    torch.testing.assert_close(pi, full_pi, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("eps", [0.5, 10.0, 1000.0])
def test_kernel_column_sums_equal_logsumexp(eps):
    """``log sum_i exp(-eps c_ij)`` through the shifted exp2 form, against float64 logsumexp; at
    eps = 1000 every exp(-eps c) underflows float32 unshifted."""
    cost = random_cost(4, 16, 49, seed=7, dtype=torch.float32) + 0.5
    reference = torch.logsumexp(-eps * cost.double(), dim=1)
    torch.testing.assert_close(
        transport.log_kernel_column_sums(cost, eps).double(), reference, rtol=2e-6, atol=1e-6
    )


@pytest.mark.parametrize("eps", [5.0, 50.0])
def test_plain_sigmoid_sums_give_the_log_domain_solution(eps, monkeypatch):
    """Where no column is below the floor the loop sums sigmoids directly; forcing the log-domain
    sums gives the same iterates."""
    cost = random_cost(8, 16, 49, seed=8, dtype=torch.float32, scale=2.0)
    assert (
        transport.log_kernel_column_sums(cost, eps).amax(dim=1) > transport.PLAIN_SUM_FLOOR
    ).all()
    plain = transport.solve_log(cost, 0.3, eps, 40)
    monkeypatch.setattr(transport, "PLAIN_SUM_FLOOR", float("inf"))
    logged = transport.solve_log(cost, 0.3, eps, 40)
    for a, b in zip(plain, logged):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_log_domain_sums_where_every_sigmoid_underflows():
    """All costs >= 1 at eps = 200: at t = 1 every sigmoid(a_j) underflows float32, the plain sum
    is log 0 = -inf, and the solver takes the log-domain sums and matches float64."""
    cost = 1.0 + random_cost(4, 8, 49, seed=9, dtype=torch.float32, scale=1.0)
    log_s = transport.log_kernel_column_sums(cost, 200.0)
    assert (log_s.amax(dim=1) < transport.PLAIN_SUM_FLOOR).all()
    assert torch.isneginf(transport.plain_sigmoid_sum(log_s)).all()
    rho, pi = partial_transport(cost, 0.3, 200.0, iters=300)
    rho64, pi64 = partial_transport(cost.double(), 0.3, 200.0, iters=300)
    torch.testing.assert_close(pi.sum((1, 2)), torch.full((4,), 0.3), rtol=1e-5, atol=0)
    # near the LP (eps c up to 400) the fixed point is ill-conditioned: float32 is ~5e-6 off of 1/49
    torch.testing.assert_close(rho.double(), rho64, rtol=0, atol=2e-5)

"""Entropy-smoothed partial optimal transport, the solver inside Generalized Sum Pooling.

Problem (P2) of the GSP paper (§4.2; Gürbüz thesis §5.2.2, whose third constraint is misprinted
as sum_i pi_ij = mu), for a cost ``c`` (``m`` prototypes x ``n`` features), a transport ratio
``mu`` and an inverse temperature ``eps``::

    min_{rho, pi >= 0}  sum_ij c_ij pi_ij + (1/eps) (sum_ij pi_ij log pi_ij + sum_j rho_j log rho_j)
    s.t.  rho_j + sum_i pi_ij = 1/n  (every j),   sum_ij pi_ij = mu.

``rho`` is the residual (discarded) mass of each feature, ``pi`` the transported mass.

Forward: the fixed point of Proposition 4.1 (GSP paper §4.2, App. A.2), from ``t = 1``::

    rho <- (1/n) / (1 + t K^T 1_m),    t <- mu / (1_m^T K rho),    K = exp(-eps c),
    pi  = t K Diag(rho).

Only the column sums ``s = K^T 1_m`` enter the loop, which runs in the log domain (finite for
any ``eps``; ``exp(-eps c)`` underflows in float32 for ``eps c > 87``). One extra ``(rho, t)``
update follows the ``iters`` ones, as in the authors' code
(github.com/yetigurbuz/generalized-sum-pooling): ``sum pi = mu`` to rounding, and ``iters = 0``
is a one-step solve. The closed-form path may stop early (:func:`solve_log`). Without autograd,
contiguous float32 CPU costs go to the C kernel of :mod:`gspdml.pooling.gsp.native` (the same
iteration; docs/benchmarks.md).

Backward: Proposition 4.2 (GSP paper §4.2, App. A.3), with the misprints of Gürbüz thesis
Prop. 5.2.2 corrected (prefactor -eps, not -gamma; q sums over prototypes)::

    q     = rho * G_rho + (pi * G_pi)^T 1_m
    eta   = (rho * G_rho)^T 1_n - n q^T rho
    kappa = 1 - mu - n rho^T rho
    dL/dc = -eps (pi * G_pi - n pi Diag(q - (eta / kappa) rho))

``eta`` and ``kappa`` vanish in the LP limit and near ``mu = 1``, where these forms cancel. With
``1 - n rho_j = n sigma_j`` and ``sum_j rho_j = 1 - mu`` (``sigma_j = sum_i pi_ij``) they are sums
of non-negative weights::

    kappa = n sum_ij rho_j pi_ij,     eta = n sum_ij rho_j pi_ij (G_rho_j - G_pi_ij),

so ``eta / kappa`` is a weighted mean of ``G_rho - G_pi``, stable everywhere. The backward keeps
the cost, ``log rho`` and ``log t`` and recomputes ``pi`` with the forward's operations (bit for
bit the same): its memory does not grow with ``iters``.

``mu = 1`` is the GAP case (GSP paper §4.1, Claim 4.1), solved directly: ``rho = 0`` and
``pi_ij = (1/n) softmax_i(-eps c_ij)`` (the "ZSP w/o GSP" row of Gürbüz thesis Table 5.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Optional, cast

import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.pooling.gsp import native

BACKWARDS = ("closed_form", "unrolled")
STATIONARY_CHECK_EVERY = 5  # iterations between convergence checks of the closed-form path
# exp(x) is computed as exp2(x log2 e): in torch 2.13's CPU kernels exp2 is vectorised and exp is
# not (timed by benchmarks/cpu_kernels.py, docs/benchmarks.md); the scale folds into an add.
LOG2_E = 1.0 / math.log(2.0)
# The t-iterates move monotonically from t = 1 to the fixed point, where max_j sigmoid(a_j) >= mu;
# so if max_j a_j > -80 at t = 1, sum_j sigmoid(a_j) >= sigmoid(-80) ~ 1.8e-35 cannot underflow in
# float32, and the loop sums sigmoids directly (faster than log-sigmoids, docs/benchmarks.md).
PLAIN_SUM_FLOOR = -80.0


def partial_transport(
    cost: torch.Tensor, mu: float, eps: float, iters: int = 100, backward: str = "closed_form"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Solve (P2) for a batch of cost matrices.

    Args:
        cost: ``[B, m, n]`` (or ``[m, n]``) transport costs, prototypes x features.
        mu: transported fraction of the mass, ``0 < mu <= 1`` (``mu = 1`` is GAP).
        eps: entropy weight (inverse temperature) ``> 0``; ``eps -> 0`` gives uniform weights,
            ``eps -> inf`` the linear program (P1).
        iters: fixed-point iterations of Proposition 4.1 (100 in the papers).
        backward: ``"closed_form"`` (Proposition 4.2, memory independent of ``iters``) or
            ``"unrolled"`` (autograd through every iteration; for benchmarks and checks).

    Returns:
        ``(rho [B, n], pi [B, m, n])`` in float32 (float64 if ``cost`` is float64). Under
        autocast the solve runs in float32.
    """
    _check(mu, eps, iters, backward)
    squeeze = cost.dim() == 2
    cost = cost.unsqueeze(0) if squeeze else cost
    if cost.dim() != 3:
        raise ValueError(f"partial_transport expects cost [B, m, n], got shape {tuple(cost.shape)}")
    with torch.autocast(device_type=cost.device.type, enabled=False):
        cost = cost if cost.dtype == torch.float64 else cost.float()
        if mu >= 1.0:
            rho, pi = _gap_limit(cost, eps)
        elif backward == "closed_form" and torch.is_grad_enabled():
            # torch leaves ``Function.apply`` unannotated; the forward gives its result's type
            apply = cast(Callable[..., tuple[torch.Tensor, torch.Tensor]], _PartialTransport.apply)
            rho, pi = apply(cost, float(mu), float(eps), int(iters))
        else:
            # Without gradients the forward alone is needed; an export (trace) records exactly
            # ``iters`` iterations, so the exported model does not depend on the traced input.
            rho, pi = _solve(
                cost,
                mu,
                eps,
                iters,
                stop_when_stationary=backward == "closed_form" and not exporting(),
            )
    return (rho[0], pi[0]) if squeeze else (rho, pi)


def _check(mu: float, eps: float, iters: int, backward: str) -> None:
    if not 0.0 < float(mu) <= 1.0:
        raise ConfigError("mu", f"the transported fraction must be in (0, 1], got {mu}")
    if not float(eps) > 0.0 or not math.isfinite(float(eps)):
        raise ConfigError("eps", f"the entropy weight must be a positive finite number, got {eps}")
    if int(iters) != iters or iters < 0:
        raise ConfigError(
            "iters", f"the number of iterations must be a non-negative integer, got {iters}"
        )
    if backward not in BACKWARDS:
        raise ConfigError(
            "backward", f"unknown backward {backward!r}; allowed: {', '.join(BACKWARDS)}"
        )


def _solve(
    cost: torch.Tensor, mu: float, eps: float, iters: int, stop_when_stationary: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-domain fixed point of Proposition 4.1 (differentiable by autograd); ``(rho, pi)``."""
    log_rho, log_t = solve_log(cost, mu, eps, iters, stop_when_stationary)
    return log_rho.exp(), transport_plan(cost, eps, log_rho, log_t)


def transport_plan(
    cost: torch.Tensor, eps: float, log_rho: torch.Tensor, log_t: torch.Tensor
) -> torch.Tensor:
    """``pi = t K Diag(rho)`` with ``K = exp(-eps c)``, formed in the log domain as
    ``2^((log t + log rho_j) log2(e) - eps log2(e) c_ij)`` (one fused add, one ``exp2``)."""
    shift = (log_t + log_rho).unsqueeze(1) * LOG2_E  # [B, 1, n]
    return _exp2_(torch.add(shift, cost, alpha=-eps * LOG2_E))


def log_kernel_column_sums(cost: torch.Tensor, eps: float) -> torch.Tensor:
    """``log s_j = log sum_i exp(-eps c_ij)`` ``[B, n]``, shifted by the smallest cost of each
    column so that the largest term is ``2^0`` (no underflow of the whole column for any eps)."""
    low = cost.amin(dim=1, keepdim=True)  # [B, 1, n]
    shifted = _exp2_(torch.add(low * (eps * LOG2_E), cost, alpha=-eps * LOG2_E))  # e^(-eps(c-low))
    return shifted.sum(dim=1).log_().sub_(low.squeeze(1), alpha=eps)


def _exp2_(x: torch.Tensor) -> torch.Tensor:
    """``2^x`` in place; an export traces ``exp(x ln 2)`` (ONNX opset 17 has no exp2)."""
    if exporting():
        return x.mul_(math.log(2.0)).exp_()
    return x.exp2_()


def solve_log(
    cost: torch.Tensor, mu: float, eps: float, iters: int, stop_when_stationary: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(log rho [B, n], log t [B, 1])`` at the fixed point of Proposition 4.1.

    With ``a_j = log t + log s_j`` the updates read ``rho_j = (1/n) sigmoid(-a_j)`` and
    ``t <- t mu n / sum_j sigmoid(a_j)``: the loop carries ``log t`` only, and ``rho`` is formed once,
    from the ``t`` before the last update. ``stop_when_stationary`` (the closed-form path, whose
    gradient is the fixed point's anyway) stops once an update moves ``log t`` by a few rounding
    units at most: ``iters`` is then a maximum, the result the same up to rounding."""
    if native.eligible(cost) and not exporting() and native.library() is not None:
        solved = solve_log_native(cost, mu, eps, iters, stop_when_stationary)
        if solved is not None:
            return solved
    n = cost.shape[-1]
    log_s = log_kernel_column_sums(cost, eps)  # log K^T 1_m, [B, n]
    log_mu_n = math.log(mu * n)
    log_t = torch.zeros(cost.shape[0], 1, dtype=cost.dtype, device=cost.device)  # t^(0) = 1
    rounding = 4.0 * torch.finfo(cost.dtype).eps
    # An export takes the log-domain sums always: a branch picked from the example input would be
    # frozen into the exported graph and be wrong (non-finite) for inputs that need the other one.
    plain = not exporting() and bool((log_s.amax(dim=1) > PLAIN_SUM_FLOOR).all())
    log_sigmoid_sum = plain_sigmoid_sum if plain else _log_sigmoid_sum
    for k in range(iters + 1):
        a = log_t + log_s
        previous, log_t = log_t, log_t + (log_mu_n - log_sigmoid_sum(a))
        if stop_when_stationary and k % STATIONARY_CHECK_EVERY == STATIONARY_CHECK_EVERY - 1:
            if bool(((log_t - previous).abs() <= rounding * (1.0 + log_t.abs())).all()):
                break
    log_rho = _logsigmoid(-a) - math.log(n)  # rho from the t before the last update
    return log_rho, log_t


def solve_log_native(
    cost: torch.Tensor, mu: float, eps: float, iters: int, stop_when_stationary: bool
) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
    """:func:`solve_log` by the C kernel (``native/transport.c``, same iteration and stopping
    rule); ``None`` where a column is below :data:`PLAIN_SUM_FLOOR` (the torch code takes the
    log-domain sums there)."""
    kernels = native.library()
    if kernels is None:  # callers check first
        return None
    b, m, n = cost.shape
    a, log_t = cost.new_empty(b, n), cost.new_empty(b, 1)
    scratch = cost.new_empty(2 * n + 2 * b)
    failed = kernels.gsp_solve(
        native.pointer(cost),
        b,
        m,
        n,
        mu,
        eps,
        iters,
        int(stop_when_stationary),
        PLAIN_SUM_FLOOR,
        native.pointer(a),
        native.pointer(log_t),
        native.pointer(scratch),
    )
    return None if failed else (F.logsigmoid(-a) - math.log(n), log_t)


def exporting() -> bool:
    # torch.jit imports is_tracing without re-exporting it (no __all__ entry) and leaves it untyped
    return torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()  # type: ignore[attr-defined, no-untyped-call]


def _logsigmoid(x: torch.Tensor) -> torch.Tensor:
    """``log sigmoid(x)``; an export spells out the stable form ``min(x, 0) - log1p(exp(-|x|))``
    (the ONNX exporter writes ``log(sigmoid(x))``, which is ``-inf`` below ``x = -88``)."""
    if exporting():
        return x.clamp(max=0.0) - torch.log1p(torch.exp(-x.abs()))
    return F.logsigmoid(x)


def plain_sigmoid_sum(a: torch.Tensor) -> torch.Tensor:
    """``log sum_j sigmoid(a_j)`` ``[B, 1]`` summed in the plain domain; exact unless every term
    underflows (see :data:`PLAIN_SUM_FLOOR`)."""
    return torch.sigmoid(a).sum(dim=1, keepdim=True).log_()


def _log_sigmoid_sum(a: torch.Tensor) -> torch.Tensor:
    """``log sum_j sigmoid(a_j)`` ``[B, 1]`` in the log domain: finite for any ``a``."""
    return torch.logsumexp(_logsigmoid(a), dim=1, keepdim=True)


def _gap_limit(cost: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``mu = 1``: ``rho = 0`` and ``pi_ij = (1/n) softmax_i(-eps c_ij)`` (the μ → 1 limit of (P2))."""
    n = cost.shape[-1]
    pi = torch.softmax(-eps * cost, dim=1) / n
    return cost.new_zeros(cost.shape[0], n), pi


def closed_form_cost_gradient(
    rho: torch.Tensor,
    pi: torch.Tensor,
    grad_rho: torch.Tensor,
    grad_pi: Optional[torch.Tensor],
    eps: float,
) -> torch.Tensor:
    """``dL/dc`` of Proposition 4.2 (corrected, stable form; see the module docstring), computed as
    ``eps n pi Diag(q - (eta / kappa) rho) - eps pi * G_pi``. ``grad_pi`` is ``[B, m, n]``, or
    ``[B, m, 1]`` when it is constant along the features, or ``None`` (no gradient reaches pi)."""
    n = rho.shape[-1]
    weighted = None if grad_pi is None else pi * grad_pi  # pi * G_pi, [B, m, n]
    # (pi * G_pi)^T 1_m, [B, n]
    column = torch.zeros_like(rho) if weighted is None else weighted.sum(dim=1)
    sigma = pi.sum(dim=1)  # transported mass per feature, [B, n]
    q = rho * grad_rho + column
    # eta / kappa = sum_j rho_j (sigma_j G_rho_j - column_j) / sum_j rho_j sigma_j
    kappa = (rho * sigma).sum(dim=1, keepdim=True)
    eta = (rho * (sigma * grad_rho - column)).sum(dim=1, keepdim=True)
    ratio = eta / kappa.clamp_min(torch.finfo(kappa.dtype).tiny)
    grad = pi * ((n * eps) * (q - ratio * rho)).unsqueeze(1)
    return grad if weighted is None else grad.sub_(weighted, alpha=eps)


class _PartialTransport(torch.autograd.Function):
    """(P2) with the closed-form backward of Proposition 4.2; saves ``(cost, log rho, log t)``."""

    @staticmethod
    def forward(
        ctx: Any, cost: torch.Tensor, mu: float, eps: float, iters: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            log_rho, log_t = solve_log(cost, mu, eps, iters, stop_when_stationary=True)
            rho, pi = log_rho.exp(), transport_plan(cost, eps, log_rho, log_t)
        ctx.save_for_backward(cost, log_rho, log_t)
        ctx.eps = eps
        return rho, pi

    @staticmethod
    def backward(
        ctx: Any, grad_rho: Optional[torch.Tensor], grad_pi: Optional[torch.Tensor]
    ) -> tuple[Optional[torch.Tensor], ...]:
        cost, log_rho, log_t = ctx.saved_tensors
        rho, pi = log_rho.exp(), transport_plan(cost, ctx.eps, log_rho, log_t)
        grad_rho = torch.zeros_like(rho) if grad_rho is None else grad_rho.to(rho.dtype)
        grad_pi = None if grad_pi is None else grad_pi.to(pi.dtype)
        return closed_form_cost_gradient(rho, pi, grad_rho, grad_pi, ctx.eps), None, None, None


def partial_transport_lp(cost: torch.Tensor, mu: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The linear program (P1) (GSP paper §4.1; Gürbüz thesis App. B.1), solved in closed form.

    (P1) is a fractional knapsack: feature ``j`` ships at most ``1/n`` at unit cost ``min_i c_ij``
    and ``mu`` is shipped in total, so the ``floor(n mu)`` cheapest features ship their whole mass,
    the next the remainder (ties to the lower index). Not differentiable; for tests, toys and the
    ``eps -> inf`` limit. Returns ``(rho [B, n], pi [B, m, n])`` like :func:`partial_transport`."""
    if not 0.0 <= float(mu) <= 1.0:
        raise ConfigError("mu", f"the transported fraction must be in [0, 1], got {mu}")
    squeeze = cost.dim() == 2
    cost = cost.unsqueeze(0) if squeeze else cost
    b, m, n = cost.shape
    best_cost, best_proto = cost.min(dim=1)  # [B, n]
    order = torch.sort(best_cost, dim=1, stable=True).indices
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(n, device=cost.device).expand(b, n))
    # mass shipped by the feature of rank r: 1/n for r < floor(n mu), the remainder at r = floor(n mu)
    ranks = torch.arange(n, dtype=cost.dtype, device=cost.device)
    shipped_by_rank = (mu - ranks / n).clamp(0.0, 1.0 / n)
    shipped = shipped_by_rank[rank]  # [B, n]
    pi = torch.zeros_like(cost)
    pi.scatter_(1, best_proto.unsqueeze(1), shipped.unsqueeze(1))
    rho = 1.0 / n - shipped
    return (rho[0], pi[0]) if squeeze else (rho, pi)

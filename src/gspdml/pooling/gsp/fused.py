"""The GSP layer as one autograd function: costs, transport, weights and the weighted sum.

Composed from autograd pieces, the layer reads and writes the ``[B, d, n]`` local features about
ten times per step, as much as a small network costs (docs/benchmarks.md); fused, a few times,
keeping nothing of size ``[B, m, n]`` beyond the costs.

Precision: costs, transport and outputs are float32 (float64 for float64 features), since the
costs of near pairs come from a cancelling difference (bf16 would move them by up to 0.1). With
bf16 features the backward's two products with the features run in bf16, as autocast runs every
other backward product (the tests bound the difference to float32, about 3e-3). Elementwise
steps avoid the slow CPU kernels (comparisons, ``where``, ``exp``: :func:`_positive`,
``transport.LOG2_E``); on float32 CPU tensors the steps from ``G_rho`` to ``G_cross`` and the
norms' sums run in the C kernel of :mod:`gspdml.pooling.gsp.native`.

Forward (GSP paper §4, Eq. 4.1 and 4.3; the costs as in :func:`~gspdml.pooling.gsp.layer.prototype_costs`)::

    a_i = 1 / max(1, ||w_i||),  b_j = 1 / max(1, ||f_j||)
    c_ij = sqrt(min(1, ||w_i||^2) + min(1, ||f_j||^2) - 2 a_i b_j w_i . f_j)
    rho, pi = (P2)(c; mu, eps, iters)                   (Prop. 4.1)
    p_j = (1/n - rho_j) / mu  (or rho_j / (1 - mu)),  x = sum_j p_j f_j,  z = pi 1_n / mu

Backward, from ``G_x [B, d]``, ``G_p [B, n]`` and ``G_z [B, m]``::

    G_p   <- G_p + F^T G_x                              (F = [f_1 .. f_n], [d, n])
    G_rho  = -G_p / mu  (or G_p / (1 - mu)),  G_pi = G_z 1_n^T / mu
    G_c    = Prop. 4.2 (corrected; closed_form_cost_gradient)
    g_ij   = G_c_ij / (2 c_ij)                          (zero where the square was clamped at 0)
    t_ij   = c_ij^2 - min(1,||w_i||^2) - min(1,||f_j||^2) = -2 a_i b_j w_i . f_j
    G_cross_ij = -2 a_i b_j g_ij
    G_||f_j||^2 = [||f_j|| < 1] sum_i g_ij - [||f_j|| > 1] (b_j^2 / 2) sum_i g_ij t_ij
    G_F = [W^T | G_x] [G_cross ; p] + 2 F Diag(G_||f||^2)      (one batched product, in the
                                                                memory layout of F)
    G_W = sum_b G_cross F^T + 2 Diag(G_||w||^2) W     (G_||w||^2 as for f, summed over b and j)

The transport part is the same code as :func:`~gspdml.pooling.gsp.transport.partial_transport`
(``solve_log``, ``transport_plan``, ``closed_form_cost_gradient``); the tests compare this
function with float64 autograd through the composed layer.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Optional, cast

import torch
from torch.autograd.function import once_differentiable

from gspdml.pooling.gsp import native
from gspdml.pooling.gsp.transport import closed_form_cost_gradient, solve_log, transport_plan

SMOOTHING = 1e-12  # added under the square root of the costs (finite gradient at c = 0)


def cost_parts(
    prototypes: torch.Tensor, features: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(c [B, m, n], ||w||^2 [m], ||f||^2 [B, n])`` for prototypes ``[m, d]`` and ``features
    [B, d, n]``: the clip-normalised L2 costs from one product of the raw features (no normalised
    copy of them, no square root of a norm). ``c^2`` is floored at ``SMOOTHING`` rather than
    shifted by it; ``sqrt(max(s + S, S)) = sqrt(max(s, 0) + S)``."""
    w_squared, f_squared = prototypes.square().sum(dim=1), _squared_column_norms(features)
    w_scale, f_scale = w_squared.clamp_min(1.0).rsqrt(), f_squared.clamp_min(1.0).rsqrt()
    scaled_prototypes = (prototypes * w_scale[:, None]).expand(features.shape[0], -1, -1)
    scaled_cross = torch.bmm(scaled_prototypes, features)  # a_i w_i.f_j
    squared = torch.addcmul(
        f_squared.clamp_max(1.0)[:, None, :], scaled_cross, f_scale[:, None, :], value=-2.0
    )
    squared.add_((w_squared.clamp_max(1.0) + SMOOTHING)[None, :, None])
    return squared.clamp_min_(SMOOTHING).sqrt_(), w_squared, f_squared


def _squared_column_norms(features: torch.Tensor) -> torch.Tensor:
    """``||f_j||^2`` ``[B, n]`` of ``features [B, d, n]``; through ``vector_norm`` when ``d`` is
    the contiguous dimension (a channels_last map: faster there, slower otherwise; docs/benchmarks.md)."""
    if features.stride(1) == 1:
        norms: torch.Tensor = torch.linalg.vector_norm(features, dim=1)
        return norms.square_()
    return features.square().sum(dim=1)


def fused_gsp(
    local: torch.Tensor,
    prototypes: torch.Tensor,
    mu: float,
    eps: float,
    iters: int,
    background: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(x [B, d], p [B, n], z [B, m])`` of GSP on ``local [B, d, n]``, with the closed-form
    backward above; ``0 < mu < 1``. ``background`` pools with the residual weights
    ``rho / (1 - mu)`` instead of ``(1/n - rho) / mu``. Precision as in the module docstring;
    ``G_F`` comes back in the features' dtype."""
    if not 0.0 < mu < 1.0:
        raise ValueError(f"fused_gsp needs 0 < mu < 1, got {mu} (mu = 1 is GAP)")
    # torch leaves ``Function.apply`` unannotated; the forward gives its result's type
    apply = cast(Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]], _FusedGSP.apply)
    return apply(local, prototypes, float(mu), float(eps), int(iters), bool(background))


def pooling_weights(rho: torch.Tensor, mu: float, background: bool = False) -> torch.Tensor:
    """GSP's weights from the residual mass: ``(1/n - rho) / mu``, or ``rho / (1 - mu)`` for the
    background (GSP paper Eq. 4.1, App. B.2)."""
    n = rho.shape[-1]
    return rho / (1.0 - mu) if background else (1.0 / n - rho) / mu


class _FusedGSP(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any,
        local: torch.Tensor,
        prototypes: torch.Tensor,
        mu: float,
        eps: float,
        iters: int,
        background: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        work = torch.float64 if local.dtype == torch.float64 else torch.float32
        features = local.to(work)  # keeps the memory layout (channels_last stays d-contiguous)
        cost, w_squared, f_squared = cost_parts(prototypes.to(work), features)
        log_rho, log_t = solve_log(cost, mu, eps, iters, stop_when_stationary=True)
        weights = pooling_weights(log_rho.exp(), mu, background)
        # sum_j p_j f_j
        vector = torch.bmm(weights.unsqueeze(1), features.transpose(1, 2)).squeeze(1)
        attributes = transport_plan(cost, eps, log_rho, log_t).sum(dim=2) / mu
        ctx.save_for_backward(
            local, prototypes, cost, log_rho, log_t, weights, w_squared, f_squared
        )
        ctx.options = (mu, eps, background)
        return vector, weights, attributes

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any,
        grad_vector: torch.Tensor,
        grad_weights: Optional[torch.Tensor],
        grad_attributes: Optional[torch.Tensor],
    ) -> tuple[Optional[torch.Tensor], ...]:
        local, prototypes, cost, log_rho, log_t, weights, w_squared, f_squared = ctx.saved_tensors
        mu, eps, background = ctx.options
        grad_x = grad_vector.to(local.dtype).unsqueeze(1)
        grad_p = torch.bmm(grad_x, local).squeeze(1).to(cost.dtype)  # F^T G_x
        if grad_weights is not None:
            grad_p = grad_p + grad_weights
        grad_rho = grad_p / (1.0 - mu) if background else -grad_p / mu
        # constant along features
        grad_pi = None if grad_attributes is None else (grad_attributes / mu).contiguous()
        grad_cross, sums_w, sums_f = cost_gradients(
            cost, log_rho, log_t, grad_rho, grad_pi, w_squared, f_squared, eps
        )
        grad_w_squared = _squared_norm_gradient(w_squared, *sums_w)
        grad_f_squared = _squared_norm_gradient(f_squared, *sums_f)

        products = local.dtype
        left = torch.cat(
            [
                prototypes.T.to(products).expand(local.shape[0], -1, -1),
                grad_vector.to(products).unsqueeze(2),
            ],
            dim=2,
        )
        right = torch.cat([grad_cross, weights.unsqueeze(1)], dim=1).to(products)
        # same memory layout as local
        norm_term = local * (2.0 * grad_f_squared).to(products).unsqueeze(1)
        # d contiguous (a channels_last map): build the gradient as [B, n, d]
        if local.stride(1) == 1:
            grad_local = torch.baddbmm(
                norm_term.transpose(1, 2), right.transpose(1, 2), left.transpose(1, 2)
            ).transpose(1, 2)
        else:
            grad_local = torch.baddbmm(norm_term, left, right)
        grad_prototypes = torch.bmm(grad_cross.to(products), local.transpose(1, 2)).sum(
            dim=0, dtype=prototypes.dtype
        )
        grad_prototypes.addcmul_(
            prototypes, (2.0 * grad_w_squared).to(prototypes.dtype).unsqueeze(1)
        )
        return grad_local, grad_prototypes, None, None, None, None


def cost_gradients(
    cost: torch.Tensor,
    log_rho: torch.Tensor,
    log_t: torch.Tensor,
    grad_rho: torch.Tensor,
    grad_pi: Optional[torch.Tensor],
    w_squared: torch.Tensor,
    f_squared: torch.Tensor,
    eps: float,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """From the transport's gradients ``G_rho [B, n]`` and ``G_pi [B, m]`` (or ``None``):
    ``G_cross [B, m, n]``, ``(sum g, sum g t)`` per prototype ``[m]`` and per feature ``[B, n]``
    (the backward steps of the module docstring), by the C kernel where it applies."""
    w_clip, f_clip = w_squared.clamp_max(1.0), f_squared.clamp_max(1.0)
    w_scale, f_scale = w_squared.clamp_min(1.0).rsqrt(), f_squared.clamp_min(1.0).rsqrt()
    tensors = (cost, log_rho, log_t, grad_rho, w_squared, f_squared) + (
        () if grad_pi is None else (grad_pi,)
    )
    kernels = native.library() if native.eligible(*tensors) else None
    if kernels is not None:
        b, m, n = cost.shape
        grad_cross, sums = torch.empty_like(cost), cost.new_empty(2 * b * n + 2 * m + m * n + 4 * n)
        sum_g_col, sum_gt_col, sum_g_row, sum_gt_row, scratch = sums.split(
            [b * n, b * n, m, m, m * n + 4 * n]
        )
        kernels.gsp_backward(
            *map(
                native.pointer,
                (cost, log_rho, log_t, grad_rho, grad_pi, w_clip, w_scale, f_clip, f_scale),
            ),
            b,
            m,
            n,
            eps,
            SMOOTHING,
            math.sqrt(SMOOTHING),
            *map(
                native.pointer, (grad_cross, sum_g_col, sum_gt_col, sum_g_row, sum_gt_row, scratch)
            ),
        )
        return grad_cross, (sum_g_row, sum_gt_row), (sum_g_col.view(b, n), sum_gt_col.view(b, n))
    pi = transport_plan(cost, eps, log_rho, log_t)
    grad_pi = None if grad_pi is None else grad_pi.unsqueeze(2)
    grad_cost = closed_form_cost_gradient(log_rho.exp(), pi, grad_rho, grad_pi, eps)
    # g = dL/dc * dc/d(c^2) = G_c / (2 c) where the square was positive, 0 where it was clamped
    g = grad_cost.mul_(_positive(cost - math.sqrt(SMOOTHING)).div_(cost)).mul_(0.5)
    offset = (SMOOTHING + w_clip)[None, :, None] + f_clip[:, None, :]
    gt = cost.square().sub_(offset).mul_(g)  # g * t with t = -2 a_i b_j w_i . f_j
    sums_w, sums_f = (g.sum(dim=(0, 2)), gt.sum(dim=(0, 2))), (g.sum(dim=1), gt.sum(dim=1))
    return g.mul_((-2.0 * w_scale)[None, :, None] * f_scale[:, None, :]), sums_w, sums_f


def _positive(x: torch.Tensor) -> torch.Tensor:
    """``[x > 0]`` as 0/1 in ``x``'s dtype, by arithmetic (``sign(relu(x))``): comparisons and
    ``where`` run branchy scalar code on the CPU (timings in docs/benchmarks.md)."""
    return x.relu().sign_()


def _squared_norm_gradient(
    squared: torch.Tensor, sum_g: torch.Tensor, sum_gt: torch.Tensor
) -> torch.Tensor:
    """``dL/d||v||^2`` through ``min(1, ||v||^2)`` (inside the ball) and the clip scale
    ``1 / max(1, ||v||)`` (outside, where ``d scale / d||v||^2 = -scale^3 / 2`` and the scale
    enters the costs as ``t / scale``)."""
    inside, outside = _positive(1.0 - squared), _positive(squared - 1.0)
    return inside * sum_g - outside * (0.5 * sum_gt / squared.clamp_min(1.0))

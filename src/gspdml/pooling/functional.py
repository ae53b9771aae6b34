"""Numerical building blocks shared by the pooling layers.

Powers, logarithms, softmaxes and linear solves are computed in float32 with autocast switched
off (:func:`full_precision`), so every layer works under bf16/fp16 autocast: the projections
(1x1 convolutions, linear maps) still run in the low precision, the sensitive reductions do not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from gspdml.errors import ConfigError


@contextmanager
def full_precision(x: torch.Tensor) -> Iterator[None]:
    """Switch autocast off on ``x``'s device for the enclosed block (cast inputs with :func:`wide`)."""
    with torch.autocast(device_type=x.device.type, enabled=False):
        yield


def wide(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32, or in float64 if it already is (never narrower than float32)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def generalized_mean(
    values: torch.Tensor,
    p: torch.Tensor | float,
    dim: int = 1,
    weights: torch.Tensor | None = None,
    eps: float = 1e-6,
) -> torch.Tensor:
    """Weighted power mean ``(sum_j a_j max(x_j, eps)^p)^(1/p)`` over ``dim``, in float32.

    This is the pooling function ``f_alpha^{-1}(f_alpha(X) a)`` with ``f_alpha(x) = x^gamma``
    (Psomas thesis Eqs. 3.8-3.9); ``weights=None`` means ``a = 1_n / n`` (GeM, Eq. 3.13).
    Values are clamped at ``eps`` because the power mean is only defined for ``x >= 0``
    (Radenovic et al., 2018, clamp their input the same way). Computed as
    ``m (sum_j a_j (x_j / m)^p)^(1/p)`` with ``m = max_j x_j`` (the same function, so the same
    gradient), which cannot overflow for large ``p``."""
    with full_precision(values):
        x = wide(values).clamp(min=eps)
        p = p.to(x.dtype) if isinstance(p, torch.Tensor) else p
        scale = x.detach().amax(dim=dim, keepdim=True)
        powered = (x / scale).pow(p)
        if weights is None:
            mean = powered.mean(dim=dim)
        else:
            mean = (powered * weights.to(x.dtype)).sum(dim=dim)
        return scale.squeeze(dim) * mean.pow(1.0 / p)


def top_k_mean(values: torch.Tensor, k: int, dim: int = 1, largest: bool = True) -> torch.Tensor:
    """Mean of the ``k`` largest (or smallest) entries along ``dim`` (global k-max pooling,
    ProxyNCA++ paper Eq. 7: ``max_h (1/k) sum_i h_i g_i`` s.t. ``sum_i h_i = k``, ``h`` binary)."""
    n = values.shape[dim]
    if k > n:
        raise ValueError(f"k-max pooling: k={k} exceeds the number of locations {n}")
    return values.topk(k, dim=dim, largest=largest).values.mean(dim=dim)


def require(condition: bool, option: str, message: str) -> None:
    """Raise :class:`ConfigError` for the pooling option ``option`` unless ``condition`` holds."""
    if not condition:
        raise ConfigError(f"model.pooling.{option}", message)


def require_map(x: torch.Tensor, name: str) -> None:
    """Layers with spatial convolutions need ``[B, C, H, W]``; tokens have no 2-D layout."""
    if x.dim() != 4:
        raise ValueError(
            f"{name} pooling needs a feature map [B, C, H, W] (it convolves over space), "
            f"got shape {tuple(x.shape)}"
        )

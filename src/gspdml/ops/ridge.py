"""Closed-form ridge regression (problem (P3) of the GSP paper §4.3; Gürbüz thesis §5.2.3).

::

    A = argmin_A sum_i ||A z_i - t_i||^2 + ridge ||A||_F^2
      = T^T Z (Z^T Z + ridge I_m)^-1 = T^T (Z Z^T + ridge I_b)^-1 Z

The two forms are equal by the push-through identity; the smaller system is solved. Used by ZSR
and XML (:mod:`gspdml.ops.halves`) and by the cross-class zero-shot analysis.
"""

from __future__ import annotations

import torch


def ridge_fit(inputs: torch.Tensor, targets: torch.Tensor, ridge: float) -> torch.Tensor:
    """Closed-form ridge regression, returned as the ``[m, d]`` matrix ``A^T`` with ``A z ~ t``.

    ``inputs`` ``[b, m]`` (rows ``z_i``), ``targets`` ``[b, d]`` (rows ``t_i``). Solves the
    smaller of the two equivalent systems (push-through identity):
    ``Z^T (Z Z^T + ridge I_b)^-1 T`` when ``b <= m``, else ``(Z^T Z + ridge I_m)^-1 Z^T T``.
    Differentiable in both arguments."""
    b, m = inputs.shape
    if b <= m:
        gram = inputs @ inputs.T + ridge * torch.eye(b, dtype=inputs.dtype, device=inputs.device)
        weights: torch.Tensor = inputs.T @ torch.linalg.solve(gram, targets)
        return weights
    gram = inputs.T @ inputs + ridge * torch.eye(m, dtype=inputs.dtype, device=inputs.device)
    solved: torch.Tensor = torch.linalg.solve(gram, inputs.T @ targets)
    return solved


def ridge_predict(
    fit_inputs: torch.Tensor, fit_targets: torch.Tensor, inputs: torch.Tensor, ridge: float
) -> torch.Tensor:
    """``Z_new A^T``: the targets predicted for ``inputs`` ``[n, m]`` by the ridge regressor fitted
    on ``(fit_inputs [b, m], fit_targets [b, d])`` (:func:`ridge_fit`); returns ``[n, d]``."""
    return inputs @ ridge_fit(fit_inputs, fit_targets, ridge)

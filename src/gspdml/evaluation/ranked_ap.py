"""Average precision of ranked relevance rows, in the two variants of the papers' code
(shared by composed image retrieval, :mod:`gspdml.cir.ranking`, and the revisited Oxford and
Paris protocol, :mod:`gspdml.evaluation.revisited`).

With 0-based ranks ``r_0 < … < r_{P-1}`` of the P positives of a row:

* ``"standard"`` — non-interpolated AP, ``AP = (1/P) Σ_j (j+1)/(r_j+1)`` (Psomas thesis §5.4.1);
* ``"trapezoid"`` — the trapezoidal rule of Radenović et al. (revisited Oxford and Paris, CVPR
  2018; the FreeDom code): ``AP = (1/P) Σ_j (p0_j + p1_j)/2`` with ``p0_j = j / r_j`` (1 when
  ``r_j = 0``) and ``p1_j = (j+1)/(r_j+1)``.

A row without positives gets AP 0.
"""

from __future__ import annotations

import torch

from gspdml.errors import ConfigError

AP_VARIANTS = ("standard", "trapezoid")


def average_precision_ranked(ranked: torch.Tensor, variant: str = "standard") -> torch.Tensor:
    """AP per row of a ranked relevance matrix ``[Q, N]`` (see the module docstring for the
    two variants); float64 ``[Q]``. Works on the positives only: O(#positives) after ranking."""
    if variant not in AP_VARIANTS:
        raise ConfigError(
            "ap", f"unknown AP variant {variant!r}; choose one of {', '.join(AP_VARIANTS)}"
        )
    ranked = torch.as_tensor(ranked, dtype=torch.bool)
    if ranked.ndim == 1:
        ranked = ranked[None]
    rows, ranks = ranked.nonzero(as_tuple=True)  # row-major: ranks ascend within a row
    positives = ranked.sum(dim=1)
    first = torch.cumsum(positives, 0) - positives  # offset of each row's first positive
    j = (torch.arange(rows.numel(), device=ranked.device) - first[rows]).to(torch.float64)
    r = ranks.to(torch.float64)
    per_positive = (j + 1.0) / (r + 1.0)  # precision after the j-th positive
    if variant == "trapezoid":
        before = torch.where(r == 0, torch.ones_like(j), j / r.clamp(min=1.0))
        per_positive = 0.5 * (before + per_positive)
    total = torch.zeros(ranked.shape[0], dtype=torch.float64, device=ranked.device)
    total.index_add_(0, rows, per_positive)
    return total / positives.clamp(min=1).to(torch.float64)  # 0 for a row without positives

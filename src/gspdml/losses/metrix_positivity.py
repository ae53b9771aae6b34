"""When does a mixed embedding act as a positive? (Psomas thesis §2.3.6, Eqs. 2.14-2.23).

For Multi-Similarity with one mixed embedding ``v`` of label ``lambda`` (Eq. 2.15), the event
``Pos(a, v)``: ``d l~ / d s(a, v) <= 0`` holds exactly when (Eq. 2.22)::

    s(a, v) <= ln(lambda / (1 - lambda)) / (beta + gamma) + m

so ``P(Pos) = F_lambda(threshold)`` with ``F_lambda`` the CDF of anchor-to-mixed similarities
(Eq. 2.23). ``beta``, ``gamma``, ``m`` are the thesis's names (``alpha``, ``beta``, ``base`` of
:class:`~gspdml.losses.multi_similarity.MultiSimilarity`).
"""

from __future__ import annotations

from typing import Union

import torch
from torch import Tensor


def positivity_threshold(
    lam: Union[float, Tensor], beta: float = 18.0, gamma: float = 75.0, m: float = 0.77
) -> Tensor:
    """Eq. 2.22: the largest similarity at which a mixed embedding with factor ``lam`` in (0, 1)
    is still pulled towards the anchor."""
    lam = torch.as_tensor(lam, dtype=torch.float64)
    return torch.log(lam / (1 - lam)) / (beta + gamma) + m


def positive_probability(
    similarities: Tensor, lam: float, beta: float = 18.0, gamma: float = 75.0, m: float = 0.77
) -> float:
    """Eq. 2.23 with the empirical CDF: the fraction of anchor-to-mixed similarities (all
    mixed with factor ``lam``) that lie at or below the threshold of Eq. 2.22."""
    threshold = positivity_threshold(lam, beta, gamma, m)
    return float((torch.as_tensor(similarities, dtype=torch.float64) <= threshold).double().mean())

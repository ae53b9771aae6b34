"""Histogram operator and prototype convex-combination (PCC) embedding of GAP's analysis
(Gürbüz thesis chapter 4: Definition 4.2.1, Eq. 4.2.5-4.2.6, Proposition 4.2.1).

For local features ``X = [x_j]_{j in [n]}`` and prototypes ``V = [nu_i]_{i in [m]}`` the
histogram operator is the optimal transport of the uniform feature mass onto the prototypes
with free prototype marginal (Gürbüz thesis Definition 4.2.1, Eq. 4.2.5)::

    (p*, pi*) = argmin_{pi >= 0, sum_i pi_ij = 1/n, sum_j pi_ij = p_i}  sum_ij ||nu_i - x_j||_2 pi_ij

whose solution sends each feature's ``1/n`` to its nearest prototype (Claim 4.2.1, Eq. 4.2.6)::

    pi*_ij = (1/n) 1(i = argmin_k ||nu_k - x_j||),   p*_i = #{j : a(j) = i} / n.

The PCC embedding is ``sum_i p*_i nu_i``. When the prototypes are a ``delta``-cover of the
features, ``||PCC - GAP||_2 = ||(1/n) sum_j (nu_a(j) - x_j)|| <= (1/n) sum_j ||nu_a(j) - x_j||
<= delta`` (the un-squared, tighter form of Prop. 4.2.1, derived from its proof).
"""

from __future__ import annotations

import torch


def nearest_prototype(features: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
    """Index ``a(j)`` of the nearest prototype of each feature (ties go to the lowest index).

    ``features`` ``[..., n, d]``, ``prototypes`` ``[m, d]``; returns int64 ``[..., n]``.
    """
    if features.shape[-1] != prototypes.shape[-1]:
        raise ValueError(
            f"features have {features.shape[-1]} channels but prototypes {prototypes.shape[-1]}"
        )
    flat = features.reshape(-1, features.shape[-1])
    return torch.cdist(flat, prototypes.to(flat)).argmin(dim=1).reshape(features.shape[:-1])


def histogram_operator(
    features: torch.Tensor, prototypes: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The histogram ``p*`` ``[..., m]`` and the plan ``pi*`` ``[..., m, n]`` of Eq. 4.2.6 for
    features ``[..., n, d]`` (one image is ``[n, d]``, a batch ``[B, n, d]``)."""
    assignment = nearest_prototype(features, prototypes)
    n, m = features.shape[-2], prototypes.shape[0]
    plan = torch.nn.functional.one_hot(assignment, m).to(features.dtype).transpose(-1, -2) / n
    return plan.sum(dim=-1), plan


def pcc_embedding(features: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
    """``sum_i p*_i nu_i``: the prototype convex combination of each image ``[..., d]``."""
    histogram, _ = histogram_operator(features, prototypes)
    return histogram @ prototypes.to(histogram)


def active_prototypes(
    features: torch.Tensor, prototypes: torch.Tensor, threshold: float = 0.0
) -> torch.Tensor:
    """Boolean ``[m]``: the prototypes that receive more than ``threshold`` of the mean histogram
    mass of a set of images ``[B, n, d]`` (one class). With ``threshold = 0`` a prototype is
    active when it is the nearest prototype of at least one local feature (Gürbüz thesis §4.3)."""
    histogram, _ = histogram_operator(features, prototypes)
    return histogram.reshape(-1, prototypes.shape[0]).mean(dim=0) > threshold

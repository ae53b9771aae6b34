"""One reduction for every loss, in the manner of pytorch-metric-learning's loss dictionary and
reducers.

A loss computes its *terms*: part names mapped to :class:`Terms` (e.g. C2's positive and
negative pairs), per pair ``[A, R]``, per anchor ``[A]`` or per triplet, sample or proxy
``[N]``. The reducer named by the loss's ``reduction`` divides the sum of each part's terms by
a count, and the loss is the weighted sum of the parts::

    L = sum_k weight_k (sum of the terms of part k) / count_k      (count_k = 0: the part is 0)

========================  ===================================================================
``mean``                  count = the total weight of the terms (each term 1 unless ``weights``
                          says otherwise: the label weights of a pair): the mean over the terms
``avg_nonzero``           count = the terms that are strictly positive (pytorch-metric-learning's
                          ``AvgNonZeroReducer``)
``anchor_mean``           count = the anchors that have terms: per anchor the sum over its
                          terms, mean over the anchors (Psomas thesis Eq. 2.10)
``sum_of_halves``         count = the terms of one half of a batch of two equal halves: the sum
                          of the two half-batch means (GSP paper Eq. 4.4)
========================  ===================================================================

A part with its own ``reduction`` (a regulariser, always a mean) keeps it. A part's terms may
come in pieces (chunks of anchors, positive and negative pairs): sums and counts add up.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from functools import reduce as fold
from typing import Optional, Union

import torch
from torch import Tensor

from gspdml.errors import ConfigError

REDUCTIONS = ("mean", "avg_nonzero", "anchor_mean", "sum_of_halves")


class Terms:
    """One part of a loss: its terms (already weighted) in one or more pieces, and what indexes
    them. ``weights`` (``mean``): how much each term of a single piece counts (None: 1 each);
    ``anchors`` (``anchor_mean``): ``[A]`` booleans, the anchors that have terms; ``weight``:
    the part's factor in the loss; ``reduction``: the part's own reduction, if fixed."""

    def __init__(
        self,
        *pieces: Tensor,
        weights: Optional[Tensor] = None,
        anchors: Optional[Tensor] = None,
        weight: float = 1.0,
        reduction: Optional[str] = None,
    ) -> None:
        self.pieces, self.weights, self.anchors = pieces, weights, anchors
        self.weight, self.reduction = weight, reduction

    def count(self, reduction: str) -> Union[Tensor, int]:
        """The denominator of ``reduction`` (module docstring)."""
        if reduction == "avg_nonzero":
            return _added((piece > 0).sum() for piece in self.pieces)
        if reduction == "anchor_mean":
            if self.anchors is None:
                raise ValueError("anchor_mean needs the anchors of the terms")
            return self.anchors.sum()
        size = sum(piece.numel() for piece in self.pieces)
        if reduction == "sum_of_halves":
            return size // 2
        return size if self.weights is None else self.weights.sum()


#: a loss's terms by part name (pytorch-metric-learning's loss dictionary)
Parts = Mapping[str, Terms]


def _added(values: Iterable[Tensor]) -> Tensor:
    """``first + second + ...``, in order."""
    return fold(operator.add, values)


def reduce(parts: Parts, reduction: str) -> Tensor:
    """``sum_k weight_k sum(terms_k) / count_k`` (module docstring); a part with no term is 0,
    keeping the graph."""
    values = []
    for part in parts.values():
        count = part.count(part.reduction or reduction)
        safe = torch.where(count > 0, count, 1) if isinstance(count, Tensor) else max(count, 1)
        values.append(part.weight * (_added(piece.sum() for piece in part.pieces) / safe))
    return _added(values)


def pair_anchors(positive_weights: Tensor, negative_weights: Tensor) -> Tensor:
    """``[A]``: the anchors (rows) that have at least one pair of positive weight."""
    return ((positive_weights + negative_weights) > 0).any(1)


def checked_reduction(value: str, allowed: tuple[str, ...]) -> str:
    """``value`` if a loss offering ``allowed`` reductions has it, else a :class:`ConfigError`
    naming ``loss.reduction``."""
    if value not in allowed:
        raise ConfigError(
            "loss.reduction", f"unknown value {value!r}; allowed: {', '.join(allowed)}"
        )
    return value

"""Which examples Metrix mixes (Psomas thesis §2.3.5 and §2.4.2, "Mixing pairs"; Tables 2.5-2.6).

A mixing set is a list of triples ``(anchor, first, second)``: the anchor stays clean and the
mixed example is ``mix_lambda(first, second) = lambda first + (1 - lambda) second`` with label
``lambda y_first + (1 - lambda) y_second`` with respect to the anchor (Eq. 2.8), ``y = 1`` for
the anchor and its positives, ``0`` for its negatives (:func:`positivity`).

* ``pos_neg``: ``M(a) = U+(a) x U-(a)`` (Eq. 2.8, ``positives="all"``); ``positives="first"``
  keeps only the first positive of ``a`` in batch order, as the authors' code does
  (``pos[index_pos][0]``; it repeats the triples once per positive, which weighs anchors alike
  in balanced batches; here each triple appears once);
* ``anc_neg``: ``M(a) = S(a) x U-(a)``, the anchor itself (label 1) with every negative, for
  every anchor (the thesis; the authors' code keeps only anchors without positives, A7);
* ``pos_pos``: ``M(a) = U+(a)^2`` (label 1; Table 2.5); ``neg_neg``: ``M(a) = U-(a)^2`` (label
  0; §2.3.5, MoCHi's pairs of Table 2.4). Both take each unordered pair of distinct examples
  once, ``first < second``: ``Beta(alpha, alpha)`` is symmetric, so the reversed pair is the
  same mixture in distribution.

For input mixup ``U-(a)`` is replaced by the ``k`` hardest negatives of ``a``: highest clean
similarity (§2.4.2).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

KINDS = ("pos_neg", "anc_neg", "pos_pos", "neg_neg")
#: the thesis's default: pos-neg or anc-neg, one of them drawn uniformly per iteration (§2.4.2)
DEFAULT_KINDS = ("pos_neg", "anc_neg")
POSITIVES = ("all", "first")


def mixing_triples(
    labels: Tensor,
    kind: str,
    similarity: Optional[Tensor] = None,
    hard_negatives: Optional[int] = None,
    positives: str = "all",
) -> Tensor:
    """int64 ``[M, 3]`` rows ``(anchor, first, second)``, sorted lexicographically.

    Args:
        labels: ``[B]`` class ids.
        kind: ``pos_neg``, ``anc_neg``, ``pos_pos`` or ``neg_neg``.
        similarity: ``[B, B]`` clean similarities, needed with ``hard_negatives``.
        hard_negatives: keep only the ``k`` negatives of each anchor with the highest similarity.
        positives: ``all`` positives of each anchor (``pos_neg``), or only its ``first`` one.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown mixing pairs {kind!r}; allowed: {', '.join(KINDS)}")
    if positives not in POSITIVES:
        raise ValueError(f"unknown positives {positives!r}; allowed: {', '.join(POSITIVES)}")
    n = len(labels)
    same = labels[:, None] == labels[None, :]
    eye = torch.eye(n, dtype=torch.bool, device=labels.device)
    negative = ~same
    if hard_negatives is not None:
        if similarity is None:
            raise ValueError("hard negatives need the clean similarities")
        scores = similarity.detach().masked_fill(same, float("-inf"))
        k = min(hard_negatives, n)
        top = torch.topk(scores, k, dim=1).indices
        hard = torch.zeros_like(negative).scatter_(1, top, True)
        negative = negative & hard
    positive = same & ~eye
    if kind == "pos_neg" and positives == "first":
        positive = positive & (positive.cumsum(1) == 1)  # the lowest-index positive of each row
    first, second = {
        "pos_neg": (positive, negative),
        "anc_neg": (eye, negative),
        "pos_pos": (positive, positive),
        "neg_neg": (negative, negative),
    }[kind]
    pairs = first[:, :, None] & second[:, None, :]
    if kind in ("pos_pos", "neg_neg"):  # unordered pairs of two distinct examples
        pairs = pairs & torch.ones(n, n, dtype=torch.bool, device=labels.device).triu(1)
    return torch.nonzero(pairs)


def positivity(labels: Tensor, triples: Tensor, lam: Tensor) -> Tensor:
    """``[M]`` labels of the mixed examples with respect to their anchors (Eq. 2.8):
    ``lambda y_first + (1 - lambda) y_second`` with ``y = [same class as the anchor]``; ``lambda``
    for pos-neg and anc-neg pairs, 1 for pos-pos, 0 for neg-neg."""
    anchor = labels[triples[:, 0]]
    y_first = (labels[triples[:, 1]] == anchor).to(lam.dtype)
    y_second = (labels[triples[:, 2]] == anchor).to(lam.dtype)
    return lam * y_first + (1 - lam) * y_second


def at_most_per_anchor(triples: Tensor, count: int) -> Tensor:
    """At most ``count`` of each anchor's triples, drawn uniformly without replacement, in
    lexicographic order (MoCHi's ``s`` synthetic points per query; i-Mix's one partner)."""
    if len(triples) == 0:
        return triples
    shuffled = triples[torch.randperm(len(triples), device=triples.device)]
    anchors = shuffled[:, 0]
    sort = torch.sort(anchors, stable=True)
    starts = torch.searchsorted(sort.values, sort.values, side="left")
    rank = torch.empty_like(anchors)  # rank of each triple among its anchor's, shuffled order
    rank[sort.indices] = torch.arange(len(anchors), device=anchors.device) - starts
    unique: torch.Tensor = torch.unique(shuffled[rank < count], dim=0)
    return unique

"""Which examples Metrix mixes (Psomas thesis §2.4.2, "Mixing pairs").

A mixing set is a list of triples ``(anchor, first, second)``: the anchor stays clean and the
mixed example is ``mix_lambda(first, second) = lambda first + (1 - lambda) second`` with label
``lambda`` with respect to the anchor.

* ``pos_neg``: ``M(a) = U+(a) x U-(a)``, every positive of ``a`` with every negative of ``a``
  (the thesis, Eq. 2.8, ``positives="all"``); ``positives="first"`` keeps only the first
  positive of ``a`` in batch order, as the authors' code does (its pos-neg builders take
  ``pos[index_pos][0]``, and repeat the resulting triples once per positive of ``a``, which
  weighs anchors alike in balanced batches; here each triple appears once);
* ``anc_neg``: ``M(a) = S(a) x U-(a)``, the anchor itself (label 1) with every negative,
  for every anchor (the thesis; the authors' code keeps only anchors without positives, A7).

For input mixup ``U-(a)`` is replaced by the ``k`` hardest negatives of ``a``: highest clean
similarity (§2.4.2).
"""

from __future__ import annotations

from typing import Optional

import torch

KINDS = ("pos_neg", "anc_neg")
POSITIVES = ("all", "first")


def mixing_triples(
    labels: torch.Tensor,
    kind: str,
    similarity: Optional[torch.Tensor] = None,
    hard_negatives: Optional[int] = None,
    positives: str = "all",
) -> torch.Tensor:
    """int64 ``[M, 3]`` rows ``(anchor, first, second)``, sorted by anchor.

    Args:
        labels: ``[B]`` class ids.
        kind: ``pos_neg`` or ``anc_neg``.
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
    first = (same & ~eye) if kind == "pos_neg" else eye
    if kind == "pos_neg" and positives == "first":
        first = first & (first.cumsum(1) == 1)  # the lowest-index positive of each row
    return torch.nonzero(first[:, :, None] & negative[:, None, :])

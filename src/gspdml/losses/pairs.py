"""Template for losses defined on (anchor, reference) pairs, with or without a memory bank.

In-batch use compares the batch with itself and drops the diagonal (self-pairs, by index).
Cross-batch use (XBM) passes ``reference``/``reference_labels``; ``reference_self[i]`` is the
column holding anchor ``i``'s own copy (or -1), dropped by index as well.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor

from gspdml.losses.base import LabelWeightedLoss, MetricLoss, Output
from gspdml.losses.reduction import Parts
from gspdml.losses.requirements import BatchRequirements


def euclidean_distances(a: Tensor, b: Tensor, normalize: bool = True) -> Tensor:
    """Pairwise L2 distances ``[A, B]`` of L2-normalised rows (the default distance of
    pytorch-metric-learning's ``LpDistance``), with a gradient that stays finite at zero distance;
    ``normalize=False`` measures the rows as given (``LpDistance(normalize_embeddings=False)``)."""
    if normalize:
        a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    squared = a.pow(2).sum(1, keepdim=True) + b.pow(2).sum(1)[None, :] - 2.0 * a @ b.T
    return torch.sqrt(squared.clamp(min=0.0) + 1e-12)


def cosine_similarities(a: Tensor, b: Tensor, normalize: bool = True) -> Tensor:
    """Pairwise cosine similarities ``[A, B]``; ``normalize=False``: inner products of the rows as given."""
    if normalize:
        a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    return a @ b.T


def paired_distances(a: Tensor, b: Tensor, normalize: bool = True) -> Tensor:
    """L2 distance ``[P]`` of row ``j`` of ``a`` and row ``j`` of ``b`` (the diagonal of
    :func:`euclidean_distances`, from the differences: exact near 0, where mixed pairs lie)."""
    if normalize:
        a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    return torch.sqrt((a - b).pow(2).sum(1) + 1e-12)


def paired_similarities(a: Tensor, b: Tensor, normalize: bool = True) -> Tensor:
    """Cosine similarity ``[P]`` of row ``j`` of ``a`` and row ``j`` of ``b`` (the diagonal of
    :func:`cosine_similarities`)."""
    if normalize:
        a, b = F.normalize(a, dim=1), F.normalize(b, dim=1)
    return (a * b).sum(1)


def log1p_sum_exp(logits: Tensor, weights: Tensor, dim: int = 1) -> Tensor:
    """``log(1 + sum_k w_k exp(logits_k))`` along ``dim``, stably; 0 where no weight is positive.

    ``weights`` is a boolean mask (``w`` in {0, 1}) or non-negative label weights: a weight
    enters as ``logits + log w``, so weight 1 leaves the logit as it is."""
    if weights.dtype == torch.bool:
        masked = logits.masked_fill(~weights, float("-inf"))
    else:
        tiny = torch.finfo(logits.dtype).tiny
        masked = torch.where(
            weights > 0, logits + torch.log(weights.to(logits.dtype).clamp(min=tiny)), float("-inf")
        )
    zero = torch.zeros_like(masked.narrow(dim, 0, 1))
    return torch.logsumexp(torch.cat([zero, masked], dim=dim), dim=dim)


def pair_masks(
    labels: Tensor, reference_labels: Tensor, self_columns: Optional[Tensor]
) -> tuple[Tensor, Tensor]:
    """Boolean ``[B, R]`` masks of positive and negative pairs; ``self_columns[i]`` (or -1) is excluded."""
    same = labels[:, None] == reference_labels[None, :]
    valid = torch.ones_like(same)
    if self_columns is not None:
        rows = torch.nonzero(self_columns >= 0).squeeze(1)
        valid[rows, self_columns[rows]] = False
    return same & valid, ~same & valid


def resolve_reference(
    embeddings: Tensor,
    labels: Tensor,
    reference: Optional[Tensor],
    reference_labels: Optional[Tensor],
    reference_self: Optional[Tensor],
) -> tuple[Tensor, Tensor, Optional[Tensor]]:
    """``(reference, reference_labels, reference_self)``; the batch itself (diagonal excluded) by default."""
    if reference is None:
        return embeddings, labels, torch.arange(len(labels), device=labels.device)
    if reference_labels is None or len(reference_labels) != len(reference):
        raise ValueError("reference_labels must be given with one label per reference row")
    return reference.to(embeddings.dtype), reference_labels, reference_self


class PairLoss(MetricLoss):
    """Base for pair losses: subclasses implement :meth:`pair_terms` on ``[B, R]`` masks.

    ``forward(embeddings, labels)`` compares the batch with itself (self-pairs dropped by index);
    with ``reference=R, reference_labels=y_R, reference_self=s`` it compares the batch (anchors) with
    another set (XBM's memory, CCP's proxies), ``s[i]`` being the column of anchor ``i``'s own copy
    in ``R`` (or -1). :meth:`distances` and :meth:`similarities` L2-normalise the rows first unless
    ``normalize_inputs`` is off (CCP's clip normalisation)."""

    #: a positive pair needs two samples of a class in the batch
    requires = BatchRequirements(samples_per_class=2)

    def distances(self, a: Tensor, b: Tensor) -> Tensor:
        return euclidean_distances(a, b, self.normalize_inputs)

    def similarities(self, a: Tensor, b: Tensor) -> Tensor:
        return cosine_similarities(a, b, self.normalize_inputs)

    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        output: Output = None,
        *,
        reference: Optional[Tensor] = None,
        reference_labels: Optional[Tensor] = None,
        reference_self: Optional[Tensor] = None,
    ) -> Tensor:
        reference, reference_labels, reference_self = resolve_reference(
            embeddings, labels, reference, reference_labels, reference_self
        )
        positive, negative = pair_masks(labels, reference_labels, reference_self)
        return self.reduce(self.anchor_terms(embeddings, labels, reference, positive, negative))

    def anchor_terms(
        self, anchors: Tensor, labels: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:
        """The terms of ``anchors`` (of classes ``labels``); most losses need only the masks."""
        return self.pair_terms(anchors, reference, positive, negative)

    def pair_terms(
        self, anchors: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:  # pragma: no cover - abstract
        raise NotImplementedError


class WeightedPairLoss(LabelWeightedLoss, PairLoss):
    """A pair loss defined on label weights: ``weighted_terms(values, positive_weights, negative_weights)``.

    ``values`` ``[A, R]`` are pair distances (``measure = "distance"``) or cosine similarities; the
    weights ``[A, R]`` in ``[0, 1]`` say how much each pair counts as positive and as negative (0
    and 0: no pair). Hard labels are the masks' 0/1 weights; Metrix's mixed examples of positivity
    ``lambda`` weigh ``(lambda, 1 - lambda)`` on their one anchor (Psomas thesis §2.4.2)."""

    measure = "similarity"

    def pair_values(self, anchors: Tensor, reference: Tensor) -> Tensor:
        """``[A, R]`` distances or similarities of all pairs."""
        measure = euclidean_distances if self.measure == "distance" else cosine_similarities
        return measure(anchors, reference, self.normalize_inputs)

    def paired_values(self, anchors: Tensor, candidates: Tensor) -> Tensor:
        """``[P]`` distances or similarities of row ``j`` with row ``j``."""
        measure = paired_distances if self.measure == "distance" else paired_similarities
        return measure(anchors, candidates, self.normalize_inputs)

    def pair_terms(
        self, anchors: Tensor, reference: Tensor, positive: Tensor, negative: Tensor
    ) -> Parts:
        values = self.pair_values(anchors, reference)
        return self.weighted_terms(values, positive.to(values.dtype), negative.to(values.dtype))

    def clean(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        """Psomas thesis Eq. 2.7 with hard labels over all ordered in-batch pairs (= Eq. 2.3), each pair
        measured row by row as the mixed pairs are (exact for near-identical embeddings, where
        ``|a|^2 + |b|^2 - 2 a.b`` cancels)."""
        off_diagonal = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        anchor, candidate = torch.nonzero(off_diagonal, as_tuple=True)
        y = (labels[anchor] == labels[candidate]).to(embeddings.dtype)
        return self.labelled(embeddings, embeddings, anchor, candidate, y)

    def labelled(
        self,
        anchors: Tensor,
        candidates: Tensor,
        anchor_index: Tensor,
        candidate_index: Tensor,
        y: Tensor,
    ) -> Tensor:
        """The loss over the listed pairs ``(anchors[anchor_index[k]], candidates[candidate_index[k]])``
        with positivity ``y[k]`` (Psomas thesis Eq. 2.7), measured row by row and laid out ``[A, C]``.
        """
        values = self.paired_values(anchors[anchor_index], candidates[candidate_index])
        y = y.to(values.dtype)
        index, shape = (anchor_index, candidate_index), (len(anchors), len(candidates))
        dense = values.new_zeros(shape).index_put(index, values)
        positive = y.new_zeros(shape).index_put(index, y)
        negative = y.new_zeros(shape).index_put(index, 1 - y)
        return self.weighted_loss(dense, positive, negative)

    def mixed(
        self, embeddings: Tensor, labels: Tensor, mixed: Tensor, triples: Tensor, lam: Tensor
    ) -> Tensor:
        """Eq. 2.9: anchor ``triples[j, 0]`` against mixed embedding ``j`` with positivity ``lam[j]``."""
        candidate = torch.arange(len(triples), device=triples.device)
        return self.labelled(embeddings, mixed, triples[:, 0], candidate, lam)

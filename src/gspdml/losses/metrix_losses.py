"""Label-weighted losses for Metrix (seed 003 chapter 2; psomas-thesis-spec §1.3-1.6, §5.A).

The generic loss of an anchor ``a`` over labelled candidates ``(v, y)`` with ``y in [0, 1]``
(seed 003 Eq. 2.7, L549-560, and its mixed version Eq. 2.9, L568-575)::

    l(a) = tau( sigma+( sum_(v,y) y rho+(s(a,v)) ) + sigma-( sum_(v,y) (1 - y) rho-(s(a,v)) ) )

With binary labels it is the clean loss (Eq. 2.3); a mixed embedding ``v = mix_lambda(x, x')``
of a positive and a negative carries ``y = lambda`` and contributes to both terms (Eq. 2.11).

Every loss here offers ``clean(embeddings, labels)`` (all in-batch pairs, self excluded) and
``mixed(embeddings, labels, mixed, triples, lam)`` where row ``j`` of ``triples`` is
``(anchor, first, second)`` and ``mixed[j] = mix_lambda_j(first, second)`` with label
``lam[j]`` with respect to ``anchor`` (``first`` is the positive or the anchor itself).
Inputs are used as given: the caller L2-normalises.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import ConfigError
from gspdml.losses.multi_similarity import multi_similarity_mining
from gspdml.losses.pairs import mean_nonzero
from gspdml.registry import Registry

#: losses that Metrix can mix: ``contrastive``, ``contrastive_similarity``, ``ms``, ``proxy_anchor``
MIXED_LOSSES = Registry("metrix loss")


class LabelledPairLoss(nn.Module):
    """A pair loss in the label-weighted form, evaluated on ``(anchor, candidate, y)`` triples.

    Subclasses implement :meth:`labelled` on flat pair lists.
    """

    supplied_by_caller = ("embedding_dim", "num_classes")

    def clean(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Eq. 2.7 with binary labels over all ordered in-batch pairs ``i != j`` (= Eq. 2.3)."""
        n = len(labels)
        anchor, candidate = torch.nonzero(~torch.eye(n, dtype=torch.bool, device=labels.device), as_tuple=True)
        y = (labels[anchor] == labels[candidate]).to(embeddings.dtype)
        return self.labelled(embeddings, embeddings, anchor, candidate, y)

    def mixed(self, embeddings, labels, mixed, triples, lam) -> torch.Tensor:
        """Eq. 2.9: anchor ``triples[j, 0]`` against mixed embedding ``j`` with label ``lam[j]``."""
        candidate = torch.arange(len(triples), device=triples.device)
        return self.labelled(embeddings, mixed, triples[:, 0], candidate, lam.to(embeddings.dtype))

    def labelled(self, anchors, candidates, anchor_index, candidate_index, y) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


@MIXED_LOSSES.register("contrastive")
class LabelledContrastive(LabelledPairLoss):
    """Distance contrastive loss with soft labels (seed 003 Eq. 2.12 in the form of the authors'
    code, psomas spec §5 A3): ``y [d - m+]_+`` and ``(1 - y) [m- - d]_+`` with ``d = ||a - v||``.

    ``reduction="avg_nonzero"`` (code): mean of the non-zero positive terms plus mean of the
    non-zero negative terms; with binary labels this is C2 (``c2`` with the same margins).
    ``reduction="anchor_mean"`` (thesis Eq. 2.3/2.10): sum per anchor, mean over anchors.
    """

    REDUCTIONS = ("avg_nonzero", "anchor_mean")

    def __init__(self, pos_margin: float = 0.0, neg_margin: float = 0.5, reduction: str = "avg_nonzero"):
        super().__init__()
        if reduction not in self.REDUCTIONS:
            raise ConfigError("loss.loss.reduction", f"unknown reduction {reduction!r}; allowed: {', '.join(self.REDUCTIONS)}")
        self.pos_margin, self.neg_margin, self.reduction = pos_margin, neg_margin, reduction

    def labelled(self, anchors, candidates, anchor_index, candidate_index, y):
        diff = anchors[anchor_index] - candidates[candidate_index]
        dist = torch.sqrt(diff.pow(2).sum(1) + 1e-12)
        pos = y * F.relu(dist - self.pos_margin)
        neg = (1 - y) * F.relu(self.neg_margin - dist)
        if self.reduction == "avg_nonzero":
            return mean_nonzero(pos) + mean_nonzero(neg)
        return _per_anchor_mean((pos + neg).sum(), anchor_index, len(anchors))


@MIXED_LOSSES.register("contrastive_similarity")
class LabelledContrastiveSimilarity(LabelledPairLoss):
    """Similarity contrastive loss of the thesis (seed 003 Eq. 2.1, L486-489; mixed Eq. 2.12,
    L589-591): ``sum -y s(a,v) + sum (1 - y) [s(a,v) - m]_+`` per anchor, mean over anchors."""

    def __init__(self, margin: float = 0.5):
        super().__init__()
        self.margin = margin

    def labelled(self, anchors, candidates, anchor_index, candidate_index, y):
        sim = (anchors[anchor_index] * candidates[candidate_index]).sum(1)
        terms = -y * sim + (1 - y) * F.relu(sim - self.margin)
        return _per_anchor_mean(terms.sum(), anchor_index, len(anchors))


@MIXED_LOSSES.register("ms", "multi_similarity")
class LabelledMultiSimilarity(LabelledPairLoss):
    """Multi-Similarity with soft labels (seed 003 Eq. 2.2 and Eq. 2.13, L491-494, L594-596)::

        l(a) = (1/alpha) log(1 + sum y e^{-alpha (s - base)}) + (1/beta) log(1 + sum (1-y) e^{beta (s - base)})

    averaged over the anchors that have candidates. ``alpha``, ``beta``, ``base`` are the MS
    paper's names (the thesis's beta, gamma, m). Defaults: the Metrix code's (17.97, 75.66, 0.77)
    with pytorch-metric-learning's ``MultiSimilarityMiner(epsilon=0.39)`` on the clean pairs (the
    thesis rounds them to 18, 75, 0.77, seed 003 L672, and names no miner); ``epsilon: null``
    uses all clean pairs. Mixed embeddings are never mined.
    """

    def __init__(self, alpha: float = 17.97, beta: float = 75.66, base: float = 0.77, epsilon: Optional[float] = 0.39):
        super().__init__()
        self.alpha, self.beta, self.base, self.epsilon = alpha, beta, base, epsilon

    def clean(self, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Eq. 2.7 with binary labels over the in-batch pairs the MS miner keeps (all pairs
        without a miner), averaged over the whole batch: an anchor the miner leaves without pairs
        counts as 0 (pytorch-metric-learning's ``MeanReducer``, which the Metrix code uses)."""
        if self.epsilon is None:
            return super().clean(embeddings, labels)
        same = labels[:, None] == labels[None, :]
        other = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
        sim = (embeddings @ embeddings.T).detach()
        positive, negative = multi_similarity_mining(sim, same & other, ~same, self.epsilon)
        anchor, candidate = torch.nonzero(positive | negative, as_tuple=True)
        y = positive[anchor, candidate].to(embeddings.dtype)
        with_pairs = torch.unique(anchor).numel()
        return self.labelled(embeddings, embeddings, anchor, candidate, y) * with_pairs / len(labels)

    def labelled(self, anchors, candidates, anchor_index, candidate_index, y):
        sim = (anchors[anchor_index] * candidates[candidate_index]).sum(1)
        n = len(anchors)
        pos = _log1p_weighted_sum_exp(-self.alpha * (sim - self.base), y, anchor_index, n) / self.alpha
        neg = _log1p_weighted_sum_exp(self.beta * (sim - self.base), 1 - y, anchor_index, n) / self.beta
        return _per_anchor_mean((pos + neg).sum(), anchor_index, n)


@MIXED_LOSSES.register("proxy_anchor")
class LabelledProxyAnchor(nn.Module):
    """Proxy Anchor with soft labels: one learnable proxy per class is the anchor (seed 003
    L498, Table 2.1); a mixed embedding ``v = mix_lambda(x, x')`` of examples of classes
    ``c, c'`` has label ``y_q = lambda [c = q] + (1 - lambda) [c' = q]`` for the two proxies
    ``q in {c, c'}``, for which it is a positive-negative mixture (Eq. 2.8 with the proxy as the
    anchor). For every other proxy both parents are negatives: Eq. 2.8 with the default mixing
    pairs ``U+(a) x U-(a)`` has no such (negative-negative) pair, so the mixed embedding is not
    used there (weight 0 in both terms).

    ``variant="original"`` (Kim et al. 2020, the baseline numbers; spec A2), with ``s`` the
    cosine similarity of proxy and embedding::

        (1/|Q+|) sum_{q in Q+} log(1 + sum_v y_q e^{-alpha (s - delta)})
          + (1/C) sum_q log(1 + sum_v (1 - y_q) e^{alpha (s + delta)})

    where ``Q+`` are the proxies with positive label mass. ``variant="thesis_generic"`` is the
    MS form of Table 2.1: ``(1/alpha) log(1 + sum y e^{-alpha (s - delta)}) + (1/alpha)
    log(1 + sum (1 - y) e^{alpha (s - delta)})`` averaged over all proxies (thesis beta = gamma =
    alpha = 32, m = delta = 0.1; L672). Binary labels give the clean loss. Proxies are
    initialised Kaiming-normal (fan-out) and trained with ``lr_multiplier = 100``. Pairs of
    (proxy, embedding) are dense: ``C x M`` similarities per term.
    """

    supplied_by_caller = ("embedding_dim", "num_classes")
    VARIANTS = ("original", "thesis_generic")
    #: mixed examples are pairs of batch examples; their anchor is every proxy
    anchorless = True
    lr_multiplier = 100.0

    def __init__(self, embedding_dim: int, num_classes: int, alpha: float = 32.0, delta: float = 0.1, variant: str = "original"):
        super().__init__()
        if variant not in self.VARIANTS:
            raise ConfigError("loss.loss.variant", f"unknown variant {variant!r}; allowed: {', '.join(self.VARIANTS)}")
        self.alpha, self.delta, self.variant, self.num_classes = alpha, delta, variant, num_classes
        self.proxies = nn.Parameter(torch.empty(num_classes, embedding_dim))
        nn.init.kaiming_normal_(self.proxies, mode="fan_out")

    def clean(self, embeddings, labels):
        y = F.one_hot(labels, self.num_classes).T.to(embeddings.dtype)
        return self.labelled(embeddings, y)

    def mixed(self, embeddings, labels, mixed, triples, lam):
        lam = lam.to(mixed.dtype)
        first = F.one_hot(labels[triples[:, 1]], self.num_classes).T.to(mixed.dtype)
        second = F.one_hot(labels[triples[:, 2]], self.num_classes).T.to(mixed.dtype)
        y = lam * first + (1 - lam) * second
        return self.labelled(mixed, y, negative=(first + second) * (1 - y))

    def labelled(self, candidates: torch.Tensor, y: torch.Tensor, negative: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Loss over the (proxy, candidate) pairs; ``y`` ``[C, M]`` weighs the positive term and
        ``negative`` (default ``1 - y``) the negative term."""
        negative = 1 - y if negative is None else negative
        sim = F.normalize(self.proxies, dim=1).to(candidates) @ candidates.T
        rows = torch.arange(self.num_classes, device=sim.device).repeat_interleave(sim.shape[1])
        term = lambda z, w: _log1p_weighted_sum_exp(z.reshape(-1), w.reshape(-1), rows, self.num_classes)  # noqa: E731
        pos = term(-self.alpha * (sim - self.delta), y)
        if self.variant == "original":
            neg = term(self.alpha * (sim + self.delta), negative)
            return pos.sum() / (y.sum(1) > 0).sum().clamp(min=1) + neg.mean()
        neg = term(self.alpha * (sim - self.delta), negative)
        return (pos + neg).mean() / self.alpha


def _per_anchor_mean(total, anchor_index, num_anchors):
    """``total = sum_a l(a)`` divided by the number of anchors that have at least one pair."""
    used = torch.zeros(num_anchors, dtype=torch.bool, device=anchor_index.device)
    used[anchor_index] = True
    return total / used.sum().clamp(min=1)


def _log1p_weighted_sum_exp(z, weight, index, n):
    """Per anchor ``log(1 + sum_k weight_k exp(z_k))`` (``weight >= 0``), computed stably."""
    z = torch.where(weight > 0, z + torch.log(weight.clamp(min=torch.finfo(z.dtype).tiny)), -math.inf)
    shift = torch.zeros(n, dtype=z.dtype, device=z.device).scatter_reduce(0, index, z.detach(), "amax")
    total = torch.exp(-shift).index_add(0, index, torch.exp(z - shift[index]))
    return shift + torch.log(total)

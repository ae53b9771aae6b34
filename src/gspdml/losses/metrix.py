"""Metrix: mixup for deep metric learning (Psomas thesis chapter 2).

Error function of one batch (Psomas thesis Eq. 2.10)::

    E = (1/|X|) sum_a [ l(a) + w l~(a) ]

``l`` is the clean loss and ``l~`` its label-weighted version over mixed examples (Eqs.
2.7-2.13): the base loss, built from :data:`~gspdml.losses.LOSSES`, computes both from label
weights (:class:`~gspdml.losses.base.LabelWeightedLoss`: ``c2``/``contrastive``,
``contrastive_similarity``, ``c1``, ``ms``, ``proxy_anchor``). The Metrix recipe's options for
those losses are in :data:`RECIPE_DEFAULTS`. Mixed examples (Eq. 2.4)::

    input:      v = f(lambda x + (1 - lambda) x')
    feature:    v = f_m(lambda g_m(x) + (1 - lambda) g_m(x'))     ("Metrix", the default)
    embedding:  v = lambda f(x) + (1 - lambda) f(x')

with ``lambda ~ Beta(alpha, alpha)``, ``alpha = 2``, ``w = 0.4`` (§2.4.2), one ``lambda`` per
iteration (the authors' code; ``lambda_per_pair`` draws one per mixed example, as Eq. 2.8 suggests). Here
``g_m`` is the embedder's backbone and ``f_m`` its head, pooling and normalisation. The mixing
pairs (:mod:`gspdml.losses.metrix_pairs`) are positive-negative or anchor-negative, chosen
uniformly at random at every iteration (§2.4.2); positive-negative pairs take every positive of
the anchor (Eq. 2.8, ``positives: all``) or only its first one (the authors' code,
``positives: first``); input mixup uses the ``k = 3`` hardest negatives (§2.4.2). Mixed
embeddings are re-normalised (the code's ``LpDistance`` does so; the thesis's s(v, v') is a raw inner
product) unless ``renormalize=False``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from gspdml.errors import TrainingError
from gspdml.losses.base import LOSSES, LabelWeightedLoss
from gspdml.losses.contrastive import C2Contrastive
from gspdml.losses.metrix_pairs import KINDS, POSITIVES, mixing_triples
from gspdml.losses.multi_similarity import MultiSimilarity
from gspdml.losses.requirements import BatchRequirements
from gspdml.losses.wrapper import LossWrapper
from gspdml.registry import parse_spec

LEVELS = ("input", "feature", "embedding")
PAIRS = ("random", *KINDS)

#: The Metrix recipe's options of its base losses, used for each option the ``loss`` spec does
#: not give (the base losses keep their own defaults outside Metrix). Source: the authors' code
#: (the thesis gives no contrastive margin; the code uses 0.5; MS (17.97, 75.66, 0.77) with
#: ``MultiSimilarityMiner(epsilon=0.39)``, which the thesis rounds to 18, 75, 0.77, Psomas thesis
#: §2.4.1). Proxy anchor (alpha 32, delta 0.1, §2.4.1) and ``contrastive_similarity`` (margin 0.5)
#: use their base defaults.
RECIPE_DEFAULTS: dict[type, dict[str, Any]] = {
    C2Contrastive: {"pos_margin": 0.0, "neg_margin": 0.5, "reduction": "avg_nonzero"},
    MultiSimilarity: {"alpha": 17.97, "beta": 75.66, "base": 0.77, "epsilon": 0.39},
}


def with_recipe_defaults(spec: Any, field: str) -> Any:
    """``spec`` of a base loss with the :data:`RECIPE_DEFAULTS` of its class filled in where unset."""
    if isinstance(spec, nn.Module) or isinstance(spec, list):
        return spec
    name, options = parse_spec(spec, field)
    defaults = RECIPE_DEFAULTS.get(LOSSES.get(name, field), {})
    return {"name": name, **{k: v for k, v in defaults.items() if k not in options}, **options}


@LOSSES.register("metrix")
class Metrix(LossWrapper):
    """Clean loss plus ``mix_weight`` times the mixed loss, mixing at ``level``.

    Args:
        loss: spec of the base loss, one with label weights (``contrastive`` = ``c2``,
            ``contrastive_similarity``, ``c1``, ``ms``, ``proxy_anchor``); options it does not
            give come from :data:`RECIPE_DEFAULTS`. With proxy anchors, each mixed pair of
            examples is used once and every proxy is its anchor.
        level: ``input``, ``feature`` (default) or ``embedding``.
        pairs: ``random`` (per iteration, the thesis), ``pos_neg`` or ``anc_neg``.
        positives: ``all`` (default): pos-neg pairs mix every positive of an anchor with every
            negative, ``U+(a) x U-(a)`` (Eq. 2.8); ``first``: only the anchor's first positive
            in batch order (the authors' code; docs/paper-vs-code.md).
        mix_alpha: ``alpha`` of ``Beta(alpha, alpha)``.
        mix_weight: ``w``.
        hard_negatives: ``k`` hardest negatives per anchor, input level only.
        lambda_per_pair: one ``lambda`` per mixed example instead of per iteration.
        renormalize: L2-normalise mixed embeddings.
        mix_chunk: feature level only: embed the mixed maps in chunks of this many, each under
            activation checkpointing, so that memory holds one chunk's maps and activations at a
            time instead of all of them (SOP: balanced batches of 20 x 5 give 38,000 mixed 2048x7x7 maps,
            at 400 KB each); the values and gradients are the same. ``null``: all at once.
            (``benchmarks/metrix_memory.py`` prints the peak memory.)
    """

    base_option = "loss"
    nested = {"loss": LOSSES}

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        loss: Any = "contrastive",
        level: str = "feature",
        pairs: str = "random",
        positives: str = "all",
        mix_alpha: float = 2.0,
        mix_weight: float = 0.4,
        hard_negatives: int = 3,
        lambda_per_pair: bool = False,
        renormalize: bool = True,
        mix_chunk: Optional[int] = None,
    ):
        super().__init__(with_recipe_defaults(loss, self.field("loss")), embedding_dim, num_classes)
        self.require_base(
            LabelWeightedLoss,
            "a loss with label weights (contrastive, contrastive_similarity, c1, ms, proxy_anchor)",
        )
        # Metrix L2-normalises the clean embeddings, and the mixed ones unless renormalize=False
        self.base.normalize_inputs = False
        self.require_choice("level", level, LEVELS)
        self.require_choice("pairs", pairs, PAIRS)
        self.require_choice("positives", positives, POSITIVES)
        self.require_positive("mix_alpha", mix_alpha)
        self.require(hard_negatives >= 1, "hard_negatives", f"must be >= 1, got {hard_negatives}")
        self.require(
            mix_chunk is None or (mix_chunk >= 1 and level == "feature"),
            "mix_chunk",
            f"must be null or >= 1 with level: feature, got {mix_chunk!r} at level {level!r}",
        )
        self.lr_multiplier = getattr(self.base, "lr_multiplier", 1.0)
        self.level, self.pairs, self.positives, self.mix_alpha, self.mix_weight = (
            level,
            pairs,
            positives,
            mix_alpha,
            mix_weight,
        )
        self.hard_negatives, self.lambda_per_pair, self.renormalize = (
            hard_negatives,
            lambda_per_pair,
            renormalize,
        )
        self.mix_chunk = mix_chunk
        if level == "feature":  # mixes backbone maps and embeds them with the rest of the model
            self.requires = BatchRequirements(reads=frozenset({"embed_features"}))

    # ------------------------------------------------------------ entry points
    def forward(self, embeddings, labels, output=None, *, kind: Optional[str] = None, lam=None):
        """Embedding-level Metrix; the other levels need the model (:meth:`training_objective`)."""
        if self.level != "embedding":
            raise TrainingError(
                f"metrix at level '{self.level}' mixes inside the network: the trainer must call "
                "training_objective(model, images, labels) (it cannot sit inside a weighted list of losses)"
            )

        def mix(triples, weights):
            return _mix(weights, embeddings[triples[:, 1]], embeddings[triples[:, 2]])

        return self.objective(embeddings, labels, mix, kind=kind, lam=lam)

    def training_objective(
        self, model: nn.Module, images, labels, *, kind: Optional[str] = None, lam=None
    ):
        if self.level == "embedding":
            output = model(images)
            return self(output.embedding, labels, output, kind=kind, lam=lam)
        if self.level == "feature":
            maps = model.backbone(images)
            clean = model.embed_features(maps).embedding

            def embed_mixed(triples, weights):
                return model.embed_features(
                    _mix(weights, maps[triples[:, 1]], maps[triples[:, 2]])
                ).embedding

            def mix(triples, weights):
                if self.mix_chunk is None or len(triples) <= self.mix_chunk:
                    return embed_mixed(triples, weights)
                return torch.cat(
                    [
                        checkpoint(embed_mixed, t, w, use_reentrant=False)
                        for t, w in zip(
                            triples.split(self.mix_chunk), weights.split(self.mix_chunk)
                        )
                    ]
                )

            return self.objective(clean, labels, mix, kind=kind, lam=lam)
        clean = model(images).embedding

        def mix(triples, weights):
            return model(_mix(weights, images[triples[:, 1]], images[triples[:, 2]])).embedding

        return self.objective(clean, labels, mix, kind=kind, lam=lam, hard=self.hard_negatives)

    # ----------------------------------------------------------------- the sum
    def objective(
        self,
        embeddings: torch.Tensor,
        labels: torch.Tensor,
        mix: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
        *,
        kind: Optional[str] = None,
        lam=None,
        hard: Optional[int] = None,
    ) -> torch.Tensor:
        """``clean + w * mixed`` (Eq. 2.10). ``mix(triples, lam [M])`` returns the ``[M, D]``
        mixed embeddings; ``kind`` and ``lam`` (a scalar or ``[M]``) override the random draws."""
        e = F.normalize(embeddings, dim=1)
        clean = self.base.clean(e, labels)
        kind = kind or (
            KINDS[int(torch.randint(len(KINDS), ()))] if self.pairs == "random" else self.pairs
        )
        triples = mixing_triples(labels, kind, e @ e.T if hard else None, hard, self.positives)
        if getattr(self.base, "anchorless", False):  # proxy anchors: each mixed pair once
            pairs = torch.unique(triples[:, 1:], dim=0)
            triples = torch.cat([pairs[:, :1], pairs], dim=1)
        if len(triples) == 0:
            return clean
        weights = (
            self._draw_lambda(len(triples), e)
            if lam is None
            else torch.as_tensor(lam, dtype=e.dtype, device=e.device)
        )
        weights = weights.expand(len(triples))
        mixed = mix(triples, weights)
        if self.renormalize:
            mixed = F.normalize(mixed, dim=1)
        return clean + self.mix_weight * self.base.mixed(e, labels, mixed, triples, weights)

    def _draw_lambda(self, count: int, like: torch.Tensor) -> torch.Tensor:
        beta = torch.distributions.Beta(
            torch.tensor(float(self.mix_alpha)), torch.tensor(float(self.mix_alpha))
        )
        draws = beta.sample((count,) if self.lambda_per_pair else ())
        return draws.to(dtype=like.dtype, device=like.device)


def _mix(lam: torch.Tensor, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """``mix_lambda(x, x') = lambda x + (1 - lambda) x'`` (Eq. 2.4) with ``lambda`` per row."""
    lam = lam.to(first.dtype).reshape(-1, *([1] * (first.dim() - 1)))
    return lam * first + (1 - lam) * second

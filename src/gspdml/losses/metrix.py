"""Metrix: mixup for deep metric learning (Psomas thesis chapter 2).

Error function of one batch (Psomas thesis Eq. 2.10)::

    E = (1/|X|) sum_a [ l(a) + w l~(a) ]

``l`` is the clean loss and ``l~`` its label-weighted version over mixed examples (Eqs.
2.7-2.13), both computed by the base loss from label weights
(:class:`~gspdml.losses.base.LabelWeightedLoss`); the Metrix recipe's options for those losses
are in :data:`RECIPE_DEFAULTS`. Mixed examples (Eq. 2.4)::

    input:      v = f(lambda x + (1 - lambda) x')
    feature:    v = f_m(lambda g_m(x) + (1 - lambda) g_m(x'))     ("Metrix", the default)
    embedding:  v = lambda f(x) + (1 - lambda) f(x')

with ``lambda ~ Beta(alpha, alpha)``, ``alpha = 2``, ``w = 0.4`` (§2.4.2), one ``lambda`` per
iteration (the authors' code); ``g_m`` is the embedder's backbone, ``f_m`` the rest. The mixing
pairs (:mod:`gspdml.losses.metrix_pairs`) are positive-negative or anchor-negative, drawn per
iteration (§2.4.2), or any kinds listed (Tables 2.4-2.6); input mixup uses the ``k = 3``
hardest negatives (§2.4.2). Mixed embeddings are re-normalised (the code's ``LpDistance``; the
thesis's s(v, v') is a raw inner product) unless ``renormalize=False``.

Proxy losses (``anchorless``) mix each pair of examples once: with proxy anchors every proxy is
the anchor of the mixed embedding; with ProxyNCA/ProxyNCA++ the mixed embedding is the anchor
(:meth:`gspdml.losses.proxy_nca.ProxyNCA.mixed`).

The mixing methods of Table 2.4 change only which triples are kept (``_select``), how a mixture
is labelled (``_labels``), the factor's law (``_draw_lambda``) or the mixed term
(``_mixed_term``): :mod:`gspdml.losses.mochi`, :mod:`gspdml.losses.imix`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Optional, Protocol, Union, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from gspdml.errors import TrainingError
from gspdml.losses.base import LOSSES, LabelWeightedLoss, Output
from gspdml.losses.contrastive import C2Contrastive
from gspdml.losses.metrix_pairs import DEFAULT_KINDS, KINDS, POSITIVES, mixing_triples, positivity
from gspdml.losses.multi_similarity import MultiSimilarity
from gspdml.losses.requirements import BatchRequirements
from gspdml.losses.wrapper import LossWrapper
from gspdml.models.output import EmbedderOutput
from gspdml.registry import parse_spec
from gspdml.typecheck import POSITIVE, OneOf

#: ``mix(triples [M, 3], lambda [M]) -> [M, D]`` mixed embeddings
Mix = Callable[[Tensor, Tensor], Tensor]
#: a mixing factor that overrides the draw: one for all, or one per mixed example
Lambda = Union[float, Tensor, None]


class FeatureEmbedder(Protocol):
    """What mixing at the feature level needs of the model, declared as ``embed_features``
    in the model's ``provides`` (the :class:`~gspdml.models.Embedder`)."""

    backbone: nn.Module

    def embed_features(self, maps: Tensor) -> EmbedderOutput: ...


LEVELS = ("input", "feature", "embedding")
PAIRS = ("random", *KINDS)
#: the losses with label weights, named in errors
LABEL_WEIGHTED = "contrastive, contrastive_similarity, c1, ms, proxy_anchor, proxy_nca, proxynca_pp"

#: The Metrix recipe's options of its base losses, used for each option the ``loss`` spec does
#: not give (the base losses keep their own defaults outside Metrix). Source: the authors' code
#: (the thesis gives no contrastive margin; the code uses 0.5; MS (17.97, 75.66, 0.77) with
#: ``MultiSimilarityMiner(epsilon=0.39)``, which the thesis rounds to 18, 75, 0.77, Psomas thesis
#: §2.4.1). Proxy anchor (alpha 32, delta 0.1, §2.4.1) and ``contrastive_similarity`` (margin 0.5)
#: use their base defaults.
RECIPE_DEFAULTS: dict[Callable[..., Any], dict[str, Any]] = {
    C2Contrastive: {"pos_margin": 0.0, "neg_margin": 0.5, "reduction": "avg_nonzero"},
    MultiSimilarity: {"alpha": 17.97, "beta": 75.66, "base": 0.77, "epsilon": 0.39},
}


def with_recipe_defaults(spec: Any, field: str) -> Any:
    """``spec`` of a base loss with the :data:`RECIPE_DEFAULTS` of its class filled in where unset."""
    if isinstance(spec, (nn.Module, list)):
        return spec
    name, options = parse_spec(spec, field)
    defaults = RECIPE_DEFAULTS.get(LOSSES.get(name, field), {})
    return {"name": name, **{k: v for k, v in defaults.items() if k not in options}, **options}


@LOSSES.register("metrix")
class Metrix(LossWrapper):
    """Clean loss plus ``mix_weight`` times the mixed loss, mixing at ``level``.

    Args:
        loss: spec of the base loss, one with label weights (``contrastive`` = ``c2``,
            ``contrastive_similarity``, ``c1``, ``ms``, ``proxy_anchor``, ``proxy_nca``,
            ``proxynca_pp``); options it does not give come from :data:`RECIPE_DEFAULTS`. With
            proxy losses each mixed pair of examples is used once (the module docstring).
        level: ``input``, ``feature`` (default) or ``embedding``, or a list of them, one drawn
            uniformly at every iteration (Tables 2.5-2.6, "mixup type combinations").
        pairs: ``random`` (``pos_neg`` or ``anc_neg`` drawn per iteration, the thesis), one of
            ``pos_neg``, ``anc_neg``, ``pos_pos``, ``neg_neg``, or a list of them, one drawn
            uniformly at every iteration.
        positives: ``all`` (default): pos-neg pairs mix every positive of an anchor with every
            negative, ``U+(a) x U-(a)`` (Eq. 2.8); ``first``: only the anchor's first positive
            in batch order (the authors' code; docs/paper-vs-code.md).
        mix_alpha: ``alpha`` of ``Beta(alpha, alpha)``.
        mix_weight: ``w``.
        hard_negatives: ``k`` hardest negatives per anchor (highest clean similarity), at the
            input level only (§2.4.2; in a list of levels, when the input level is drawn: Table
            2.5's ``{1, all}`` for ``{input, feature}``); or a mapping of levels to ``k`` (``null``:
            all negatives), e.g. ``{feature: 20}`` for Table 2.5's ``k = 20, feature``.
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
    base_kind = (LabelWeightedLoss, f"a loss with label weights ({LABEL_WEIGHTED})")

    def __init__(
        self,
        embedding_dim: int,
        num_classes: int,
        loss: Any = "contrastive",
        level: Union[str, Sequence[str]] = "feature",
        pairs: Union[str, Sequence[str]] = "random",
        positives: Annotated[str, OneOf(POSITIVES)] = "all",
        mix_alpha: Annotated[float, POSITIVE] = 2.0,
        mix_weight: float = 0.4,
        hard_negatives: Union[int, Mapping[str, Optional[int]]] = 3,
        lambda_per_pair: bool = False,
        renormalize: bool = True,
        mix_chunk: Optional[int] = None,
    ):
        super().__init__(with_recipe_defaults(loss, self.field("loss")), embedding_dim, num_classes)
        # Metrix L2-normalises the clean embeddings, and the mixed ones unless renormalize=False
        self.weighted_base.normalize_inputs = False
        self.levels = self._choices("level", level, LEVELS)
        kinds = DEFAULT_KINDS if pairs == "random" else self._choices("pairs", pairs, PAIRS[1:])
        self.hard_by_level = self._hard_by_level(hard_negatives)
        self.require(
            mix_chunk is None or (mix_chunk >= 1 and "feature" in self.levels),
            "mix_chunk",
            f"must be null or >= 1 with level: feature, got {mix_chunk!r} at level {level!r}",
        )
        self.lr_multiplier = getattr(self.base, "lr_multiplier", 1.0)
        # as configured (one name or a list), and the names drawn from
        self.level, self.pairs = _as_given(level), _as_given(pairs)
        self.kinds, self.positives = kinds, positives
        self.mix_alpha, self.mix_weight = mix_alpha, mix_weight
        self.hard_negatives, self.lambda_per_pair = hard_negatives, lambda_per_pair
        self.renormalize, self.mix_chunk = renormalize, mix_chunk
        if "feature" in self.levels:  # mixes backbone maps, embeds them with the rest of the model
            self.requires = BatchRequirements(reads=frozenset({"embed_features"}))

    @property
    def weighted_base(self) -> LabelWeightedLoss:
        """``base``, checked to be a loss with label weights."""
        return cast(LabelWeightedLoss, self.base)

    def _choices(self, option: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
        """``value`` (one name or a non-empty list of distinct names) as a tuple of names."""
        names = (value,) if isinstance(value, str) else tuple(value)
        self.require(
            len(names) > 0 and len(set(names)) == len(names),
            option,
            f"must be one name or a list of distinct names, got {value!r}",
        )
        for name in names:
            self.require_choice(option, name, allowed)
        return names

    def _hard_by_level(self, value: Any) -> dict[str, Optional[int]]:
        """``{level: k or None}`` from ``hard_negatives`` (an int: the input level's)."""
        by_level = dict(value) if isinstance(value, Mapping) else {"input": value}
        for level, k in by_level.items():
            self.require_choice("hard_negatives", level, LEVELS)
            self.require(
                k is None or (isinstance(k, int) and not isinstance(k, bool) and k >= 1),
                "hard_negatives",
                f"k must be an integer >= 1 or null (all negatives), got {k!r} at level {level!r}",
            )
        return by_level

    @staticmethod
    def _draw(names: tuple[str, ...]) -> str:
        """One of ``names``, uniformly (the first without a draw when there is one)."""
        return names[int(torch.randint(len(names), ()))] if len(names) > 1 else names[0]

    # ------------------------------------------------------------ entry points
    def forward(
        self,
        embeddings: Tensor,
        labels: Tensor,
        output: Output = None,
        *,
        kind: Optional[str] = None,
        lam: Lambda = None,
    ) -> Tensor:
        """Embedding-level Metrix; the other levels need the model (:meth:`training_objective`)."""
        if self.levels != ("embedding",):
            raise TrainingError(
                f"metrix at level {'/'.join(self.levels)} mixes inside the network: the trainer must call "
                "training_objective(model, images, labels) (it cannot sit inside a weighted list of losses)"
            )
        hard = self.hard_by_level.get("embedding")
        return self.objective(embeddings, labels, _mixer(embeddings), kind=kind, lam=lam, hard=hard)

    def training_objective(
        self,
        model: nn.Module,
        images: Tensor,
        labels: Tensor,
        *,
        kind: Optional[str] = None,
        lam: Lambda = None,
        level: Optional[str] = None,
    ) -> Tensor:
        """One batch at ``level`` (default: one of the configured levels, drawn uniformly)."""
        clean, mix, hard = self._embedder_mix(model, images, level or self._draw(self.levels))
        return self.objective(clean, labels, mix, kind=kind, lam=lam, hard=hard)

    def mixed_embeddings(
        self,
        model: nn.Module,
        images: Tensor,
        labels: Tensor,
        *,
        kind: Optional[str] = None,
        lam: Lambda = None,
        level: Optional[str] = None,
    ) -> tuple[Tensor, Tensor]:
        """The clean ``[B, D]`` and mixed ``[M, D]`` embeddings (L2-normalised) one training step would
        use, without the loss: the augmented set ``X^`` of the utilisation measure
        (:mod:`gspdml.analysis.utilization`, Psomas thesis Eq. 2.24)."""
        clean, mix, hard = self._embedder_mix(model, images, level or self._draw(self.levels))
        e, _, _, mixed = self._mixing(clean, labels, mix, kind, lam, hard)
        return e, e.new_zeros((0, e.shape[1])) if mixed is None else mixed

    def _embedder_mix(
        self, model: nn.Module, images: Tensor, level: str
    ) -> tuple[Tensor, Mix, Optional[int]]:
        """``(clean embeddings, mix(triples, lambda), hard negatives k or None)`` at ``level``
        (Eq. 2.4)."""
        hard = self.hard_by_level.get(level)  # None: all negatives
        if level == "embedding":
            e: Tensor = model(images).embedding
            return e, _mixer(e), hard
        if level == "feature":
            embedder = cast(FeatureEmbedder, model)
            maps = embedder.backbone(images)

            def embed_mixed(triples: Tensor, weights: Tensor) -> Tensor:
                return embedder.embed_features(_mixer(maps)(triples, weights)).embedding

            def mix_features(triples: Tensor, weights: Tensor) -> Tensor:
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

            return embedder.embed_features(maps).embedding, mix_features, hard

        def mix_inputs(triples: Tensor, weights: Tensor) -> Tensor:
            mixed: Tensor = model(_mixer(images)(triples, weights)).embedding
            return mixed

        return model(images).embedding, mix_inputs, hard

    # ----------------------------------------------------------------- the sum
    def objective(
        self,
        embeddings: Tensor,
        labels: Tensor,
        mix: Mix,
        *,
        kind: Optional[str] = None,
        lam: Lambda = None,
        hard: Optional[int] = None,
    ) -> Tensor:
        """``clean + w * mixed`` (Eq. 2.10); ``kind`` and ``lam`` (a scalar or ``[M]``) override
        the draws."""
        e, triples, weights, mixed = self._mixing(embeddings, labels, mix, kind, lam, hard)
        clean = self.weighted_base.clean(e, labels)
        if mixed is None:
            return clean
        return clean + self.mix_weight * self._mixed_term(e, labels, mixed, triples, weights)

    # ------------------------------------------- what the mixing competitors change
    def _select(self, triples: Tensor) -> Tensor:
        """The triples to mix, of those of the pair kind (all of them)."""
        return triples

    def _labels(self, labels: Tensor, triples: Tensor, lam: Tensor) -> Tensor:
        """Labels of the mixtures for their anchors: interpolated (Eq. 2.8)."""
        return positivity(labels, triples, lam)

    def _mixed_term(
        self, e: Tensor, labels: Tensor, mixed: Tensor, triples: Tensor, lam: Tensor
    ) -> Tensor:
        """The mixed loss (Eq. 2.9): each clean anchor against its mixtures. Proxy losses label a
        mixture by its parents' classes, pair losses by :meth:`_labels`."""
        anchorless = getattr(self.base, "anchorless", False)
        y = lam if anchorless else self._labels(labels, triples, lam)
        return self.weighted_base.mixed(e, labels, mixed, triples, y)

    def _mixing(
        self,
        embeddings: Tensor,
        labels: Tensor,
        mix: Mix,
        kind: Optional[str],
        lam: Lambda,
        hard: Optional[int],
    ) -> tuple[Tensor, Tensor, Tensor, Optional[Tensor]]:
        """``(normalised clean embeddings, triples [M, 3], lambda [M], mixed [M, D] or None without a
        mixing pair)``: the draws of pairs and ``lambda``, and Eq. 2.4."""
        e = F.normalize(embeddings, dim=1)
        kind = kind or self._draw(self.kinds)
        triples = self._select(
            mixing_triples(labels, kind, e @ e.T if hard else None, hard, self.positives)
        )
        if getattr(self.base, "anchorless", False):  # proxy losses: each mixed pair once
            pairs = torch.unique(triples[:, 1:], dim=0)
            triples = torch.cat([pairs[:, :1], pairs], dim=1)
        if len(triples) == 0:
            return e, triples, e.new_zeros(0), None
        if lam is None:
            weights = self._draw_lambda(len(triples), e, kind)
        else:
            weights = torch.as_tensor(lam, dtype=e.dtype, device=e.device)
        weights = weights.expand(len(triples))
        mixed = mix(triples, weights)
        if self.renormalize:
            mixed = F.normalize(mixed, dim=1)
        return e, triples, weights, mixed

    def _draw_lambda(self, count: int, like: Tensor, kind: str) -> Tensor:
        beta = torch.distributions.Beta(
            torch.tensor(float(self.mix_alpha)), torch.tensor(float(self.mix_alpha))
        )
        draws = beta.sample((count,) if self.lambda_per_pair else ())
        return draws.to(dtype=like.dtype, device=like.device)


def _as_given(value: Union[str, Sequence[str]]) -> Union[str, list[str]]:
    return value if isinstance(value, str) else list(value)


def _mixer(rows: Tensor) -> Mix:
    """``mix(triples, lambda)``: ``mix_lambda(x, x') = lambda x + (1 - lambda) x'`` (Eq. 2.4) of
    the rows ``triples[:, 1]`` and ``triples[:, 2]`` of ``rows``, with ``lambda`` per triple."""

    def mix(triples: Tensor, lam: Tensor) -> Tensor:
        first, second = rows[triples[:, 1]], rows[triples[:, 2]]
        lam = lam.to(first.dtype).reshape(-1, *([1] * (first.dim() - 1)))
        return lam * first + (1 - lam) * second

    return mix

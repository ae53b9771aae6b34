"""The loss interface: ``loss(embeddings, labels, output=None) -> scalar`` (docs/design.md).

* ``embeddings`` ``[B, D]`` as the embedder returned them; ``labels`` ``[B]`` int64 class ids
  in ``[0, num_classes)``; ``output`` the full :class:`~gspdml.models.EmbedderOutput`, for
  losses that read pooling extras (ZSR ``attributes``, XML ``local``).
* A loss with parameters sets ``lr_multiplier``; the trainer puts every loss parameter into an
  optimiser group with it. ``embedding_dim`` and ``num_classes`` are supplied by the trainer.
* Wrappers (XBM, CCP, ZSR, XML, Metrix) subclass :class:`~gspdml.losses.wrapper.LossWrapper`.
* A loss declares what it needs of a batch in ``requires``
  (:class:`~gspdml.losses.requirements.BatchRequirements`, combined with its parts' in
  :meth:`MetricLoss.batch_requirements`) and its training-event controller in ``controller``.
* Any ``nn.Module`` with ``forward(embeddings, labels)`` becomes a loss by :func:`as_metric_loss`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Optional

import torch
from torch import Tensor, nn

from gspdml.errors import ConfigError
from gspdml.losses.reduction import Parts, checked_reduction, reduce
from gspdml.losses.requirements import BatchRequirements, combined
from gspdml.models.output import EmbedderOutput
from gspdml.registry import Registry, parse_spec

LOSSES = Registry("loss")
#: the embedder output a loss may read (None: the embeddings alone)
Output = Optional[EmbedderOutput]


class MetricLoss(nn.Module):
    """Base class of every loss. Subclasses implement :meth:`forward`."""

    supplied_by_caller = ("embedding_dim", "num_classes")
    #: learning-rate multiplier for this loss's own parameters (e.g. 100 for proxies)
    lr_multiplier: float = 1.0
    #: what this loss itself needs of a batch and of the embedder output
    requires = BatchRequirements()
    #: the name of the training-event controller ``training/`` attaches to it (None: none)
    controller: str | None = None
    #: the reductions the loss offers (:mod:`gspdml.losses.reduction`) and the one in force
    reductions: tuple[str, ...] = ("mean",)
    reduction: str = "mean"
    #: L2-normalise the embeddings (a wrapper that normalises them itself turns this off)
    normalize_inputs = True

    def reduce(self, parts: Parts) -> Tensor:
        """The loss of its terms, reduced by ``self.reduction``."""
        return reduce(parts, self.reduction)

    def set_reduction(self, reduction: str) -> None:
        """The ``reduction`` option: one of :attr:`reductions`, else a :class:`ConfigError`."""
        self.reduction = checked_reduction(reduction, self.reductions)

    def batch_requirements(self) -> BatchRequirements:
        """What the whole loss needs (its own ``requires``; wrappers add their parts')."""
        return self.requires

    def forward(
        self, embeddings: Tensor, labels: Tensor, output: Output = None
    ) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def training_objective(self, model: nn.Module, images: Tensor, labels: Tensor) -> Tensor:
        """The trainer's entry point for one batch: embed (under the trainer's autocast), then the loss
        in float32 with autocast off (in bfloat16 e.g. SoftTriple's centre regulariser turned NaN); a
        float64 model keeps float64. Mixup at input or feature level overrides it."""
        output = model(images)
        embedding = output.embedding
        with torch.autocast(device_type=images.device.type, enabled=False):
            value: torch.Tensor = self(
                embedding.to(torch.promote_types(embedding.dtype, torch.float32)), labels, output
            )
            return value


class LabelWeightedLoss(MetricLoss):
    """Mixin of the losses also defined on label *weights*, the positivity of a pair in ``[0, 1]``
    (Psomas thesis Eqs. 2.7-2.9, §2.4.2): the base losses :class:`~gspdml.losses.metrix.Metrix` mixes.

    ``clean(embeddings, labels)`` is the loss with hard labels; ``mixed(embeddings, labels, mixed,
    triples, lam)`` the loss of anchor ``triples[j, 0]`` against ``mixed[j]``: pair losses get its
    positivity in ``lam[j]`` (Eq. 2.8, :func:`~gspdml.losses.metrix_pairs.positivity`), proxy
    losses (``anchorless``) the mixing factor. Pair losses and proxy anchors compute both from one
    ``weighted_terms(values, positive_weights, negative_weights)``; hard labels are 0/1 weights."""

    def weighted_terms(
        self, values: Tensor, positive_weights: Tensor, negative_weights: Tensor
    ) -> Parts:  # pragma: no cover - abstract
        raise NotImplementedError

    def weighted_loss(
        self, values: Tensor, positive_weights: Tensor, negative_weights: Tensor
    ) -> Tensor:
        """The reduced loss of :meth:`weighted_terms`."""
        return self.reduce(self.weighted_terms(values, positive_weights, negative_weights))

    def clean(self, embeddings: Tensor, labels: Tensor) -> Tensor:
        value: Tensor = self(embeddings, labels)
        return value

    def mixed(
        self, embeddings: Tensor, labels: Tensor, mixed: Tensor, triples: Tensor, lam: Tensor
    ) -> Tensor:  # pragma: no cover - abstract
        raise NotImplementedError


class WeightedSum(MetricLoss):
    """``sum_k w_k L_k`` over several losses, built from a YAML list of specs with ``weight``."""

    def __init__(self, losses: Sequence[MetricLoss], weights: Sequence[float]) -> None:
        super().__init__()
        if len(losses) != len(weights):
            raise ValueError("one weight per loss")
        self.losses = nn.ModuleList(losses)
        self.weights = [float(w) for w in weights]

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        total = embeddings.new_zeros(())
        for weight, loss in zip(self.weights, self.losses):
            total = total + weight * loss(embeddings, labels, output)
        return total

    def batch_requirements(self) -> BatchRequirements:
        return self.requires.combine(combined(self.losses))


class ModuleLoss(MetricLoss):
    """A user loss: any module with ``forward(embeddings, labels) -> scalar``, reading no other
    output field and declaring no batch requirement."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        value: Tensor = self.module(embeddings, labels)
        return value


def as_metric_loss(loss: nn.Module) -> MetricLoss:
    """``loss`` itself when it is a :class:`MetricLoss`, else wrapped in :class:`ModuleLoss`."""
    return loss if isinstance(loss, MetricLoss) else ModuleLoss(loss)


def loss_entries(spec: Any, field: str) -> list[tuple[dict[str, Any], float, str]]:
    """``({"name": ..., **options}, weight, field)`` of each loss of ``spec``: one spec, or a
    list of specs with optional ``weight`` (weight 1 when unset) at ``field[i]``, given by name
    (``{name: xbm, weight: 0.5}``) or in the named form (``{xbm: {weight: 0.5}}``): the entry's
    weight in the sum of losses, never an option of the loss."""
    specs = spec if isinstance(spec, list) else [spec]
    wheres = [f"{field}[{i}]" for i in range(len(spec))] if isinstance(spec, list) else [field]
    parsed = [(parse_spec(item, where), where) for item, where in zip(specs, wheres)]
    return [(*_without_weight(name, **options), where) for (name, options), where in parsed]


def _without_weight(name: str, weight: float = 1.0, **options: Any) -> tuple[dict[str, Any], float]:
    return {"name": name, **options}, float(weight)


def check_loss(spec: Any, field: str = "loss") -> None:
    """Validate a loss spec (one spec or a list of specs with optional ``weight``)."""
    for item, _, where in loss_entries(spec, field):
        LOSSES.check(item, where)


@contextmanager
def located(field: str) -> Iterator[None]:
    """Name the errors of a loss being built by the config field of its spec: the first segment of
    the error's field (the loss's own name, ``loss`` or ``triplet``) is replaced by ``field``
    (``loss[1].class_init``, ``loss.base.mining``); nested wrappers gather the path one at a time.
    """
    try:
        yield
    except ConfigError as error:
        _, dot, rest = error.field.partition(".")
        message = str(error)[len(error.field) + 2 :] if error.field else str(error)
        raise ConfigError(f"{field}{dot}{rest}", message) from error.__cause__


def build_loss(spec: Any, field: str = "loss", **context: Any) -> MetricLoss:
    """Build a loss from its spec; ``context`` holds ``embedding_dim`` and ``num_classes``.

    A list of specs becomes a :class:`WeightedSum` (each item may carry ``weight``); an error
    names the item's position (``loss[1].class_init``, :func:`located`). Wrappers call this
    function for their ``base`` argument with the same context."""
    losses, weights = [], []
    for item, weight, where in loss_entries(spec, field):
        with located(where):
            losses.append(LOSSES.build(item, "loss", **context))
        weights.append(weight)
    if isinstance(spec, list) or weights[0] != 1.0:
        return WeightedSum(losses, weights)
    loss: MetricLoss = losses[0]
    return loss

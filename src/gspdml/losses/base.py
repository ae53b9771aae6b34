"""The loss interface: ``loss(embeddings, labels, output=None) -> scalar``.

Conventions (docs/design.md):

* ``embeddings`` ``[B, D]`` are what the embedder returned (L2-normalised by default);
  ``labels`` ``[B]`` are int64 class ids in ``[0, num_classes)`` of the training split.
* ``output`` is the full :class:`~gspdml.models.EmbedderOutput`; regularisers that read pooling
  extras (ZSR reads ``attributes``, XML reads ``local``) take it from there.
* A loss that owns parameters (proxies, class embeddings) sets ``lr_multiplier``; the trainer
  puts every parameter of every loss into an optimiser group with that multiplier, so proxies
  are never silently left out of the optimiser.
* Wrappers (XBM, CCP, ZSR, XML, Metrix) subclass :class:`~gspdml.losses.wrapper.LossWrapper`:
  they hold a ``base`` loss and are registered like any other.
* Arguments named ``embedding_dim`` and ``num_classes`` are supplied by the trainer, not the config.
* A loss declares what it needs of a batch and of the embedder output in ``requires`` (a
  :class:`~gspdml.losses.requirements.BatchRequirements`; wrappers and sums combine theirs with
  their parts' in :meth:`MetricLoss.batch_requirements`), and the training-event controller it
  needs in ``controller`` (``"ccp"``; ``training/`` attaches it). The trainer checks these once.
* A user loss, any ``nn.Module`` with ``forward(embeddings, labels)``, becomes a loss through
  :func:`as_metric_loss`.
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
        """The trainer's entry point for one batch. The default embeds (under the trainer's
        autocast) and computes the loss in float32 with autocast off: similarities, softmaxes and
        square roots of distances lose too much in bfloat16 (e.g. SoftTriple's centre
        regulariser turned NaN). A float64 model keeps float64 (the step-parity tests compare
        with the authors' code in float64). Methods that change the forward pass itself (mixup
        at input or feature level) override it."""
        output = model(images)
        embedding = output.embedding
        with torch.autocast(device_type=images.device.type, enabled=False):
            value: torch.Tensor = self(
                embedding.to(torch.promote_types(embedding.dtype, torch.float32)), labels, output
            )
            return value


class LabelWeightedLoss(MetricLoss):
    """Mixin of the losses that are also defined on label *weights* (the positivity of a pair in
    ``[0, 1]``, as Metrix's mixed examples carry; Psomas thesis Eqs. 2.7-2.9, §2.4.2): the
    base losses that :class:`~gspdml.losses.metrix.Metrix` can mix.

    ``clean(embeddings, labels)`` is the loss with hard labels (the ordinary ``forward``);
    ``mixed(embeddings, labels, mixed, triples, lam)`` the loss of anchor ``triples[j, 0]``
    against mixed embedding ``mixed[j]`` of ``x_first`` and ``x_second``: pair losses get its
    positivity with respect to the anchor in ``lam[j]`` (Eq. 2.8,
    :func:`~gspdml.losses.metrix_pairs.positivity`); proxy losses (``anchorless``) get the mixing
    factor ``mixed[j] = lam_j x_first + (1 - lam_j) x_second`` and label it by the proxies'
    classes. Pair losses and proxy anchors compute both from one ``weighted_terms(values,
    positive_weights, negative_weights)`` (:mod:`gspdml.losses.reduction`); the hard labels are
    its 0/1 weights.
    """

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
    """A user loss: any module with ``forward(embeddings, labels) -> scalar``; it reads no other
    output field and declares no batch requirement (subclass :class:`MetricLoss` to declare
    some)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, embeddings: Tensor, labels: Tensor, output: Output = None) -> Tensor:
        value: Tensor = self.module(embeddings, labels)
        return value


def as_metric_loss(loss: nn.Module) -> MetricLoss:
    """``loss`` itself when it is a :class:`MetricLoss`, else wrapped in :class:`ModuleLoss`."""
    return loss if isinstance(loss, MetricLoss) else ModuleLoss(loss)


def _items(spec: Any, field: str) -> list[tuple[dict[str, Any], float, str]]:
    """``({"name": ..., **options}, weight, field)`` of each loss of ``spec``: one spec, or a
    list of specs with optional ``weight`` (weight 1 when unset) at ``field[i]``."""
    specs = spec if isinstance(spec, list) else [spec]
    wheres = [f"{field}[{i}]" for i in range(len(spec))] if isinstance(spec, list) else [field]
    return [(*_weight_apart(*parse_spec(item, where)), where) for item, where in zip(specs, wheres)]


def _weight_apart(name: str, options: dict[str, Any]) -> tuple[dict[str, Any], float]:
    return _without_weight(name, **options)


def _without_weight(name: str, weight: float = 1.0, **options: Any) -> tuple[dict[str, Any], float]:
    return {"name": name, **options}, float(weight)


def check_loss(spec: Any, field: str = "loss") -> None:
    """Validate a loss spec (one spec or a list of specs with optional ``weight``)."""
    for item, _, where in _items(spec, field):
        LOSSES.check(item, where)


@contextmanager
def located(field: str) -> Iterator[None]:
    """Name the errors of a loss being built by the config field of its spec.

    A loss names a bad option by its own name (``loss.class_init`` for a wrapper,
    ``triplet.mining``): the first segment of the field stands for the loss itself, whatever its
    place in the config. ``field`` replaces it (``loss[1].class_init``, ``loss.base.mining``); a
    wrapper builds its base loss at ``loss.<option>``, so nested errors gather their path one
    wrapper at a time."""
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
    function for their ``base`` argument with the same context.
    """
    losses, weights = [], []
    for item, weight, where in _items(spec, field):
        with located(where):
            losses.append(LOSSES.build(item, "loss", **context))
        weights.append(weight)
    if isinstance(spec, list) or weights[0] != 1.0:
        return WeightedSum(losses, weights)
    loss: MetricLoss = losses[0]
    return loss

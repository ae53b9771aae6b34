"""What a loss needs of each training batch and of the embedder output, declared once.

A loss declares its :class:`BatchRequirements` (wrappers and sums combine their parts'); the
trainer checks them once, before step 1, against the sampler's batches
(:meth:`BatchRequirements.check_batches`) and the fields the model declares
(:meth:`BatchRequirements.check_output`), so no loss checks its batch at every step.

* ``halves``: the batch is two class-disjoint halves (ZSR, GSP paper Algorithm 4; XML paper
  Eq. 2.8): ``data.halves: true``.
* ``samples_per_class``: per class in a batch; pair losses need 2 (a positive pair), with a
  memory (XBM) 1.
* ``reads``: the :class:`~gspdml.models.EmbedderOutput` fields besides ``embedding`` it reads
  (ZSR ``attributes``, XML ``local``), or ``embed_features`` (Metrix at feature level).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from torch import nn

from gspdml.errors import ConfigError
from gspdml.pooling import POOLINGS
from gspdml.settings.sections import DataConfig


@dataclass(frozen=True)
class BatchRequirements:
    """A loss's declaration (module docstring)."""

    halves: bool = False
    samples_per_class: int = 1
    reads: frozenset[str] = frozenset()

    def combine(self, other: BatchRequirements) -> BatchRequirements:
        """What two losses on the same batch need together."""
        return BatchRequirements(
            self.halves or other.halves,
            max(self.samples_per_class, other.samples_per_class),
            self.reads | other.reads,
        )

    def with_memory(self) -> BatchRequirements:
        """The requirements when a memory of earlier batches supplies the positive pairs."""
        return replace(self, samples_per_class=1)

    def check_batches(self, data: DataConfig) -> None:
        """Refuse a ``data`` config section whose batches do not meet the declaration."""
        if self.halves and not (data.halves and data.sampler == "balanced"):
            raise ConfigError(
                "data.halves",
                f"the loss needs each batch ordered as two class-disjoint halves, got "
                f"data.halves: {data.halves}, data.sampler: {data.sampler}; set "
                "data.halves: true with data.sampler: balanced",
            )
        if data.sampler == "balanced" and data.samples_per_class < self.samples_per_class:
            raise ConfigError(
                "data.samples_per_class",
                f"the loss needs at least {self.samples_per_class} samples per class in a "
                f"batch, got {data.samples_per_class} (pair losses: with 1 there is no "
                "positive pair)",
            )

    def check_output(self, provides: frozenset[str]) -> None:
        """Refuse a model that does not declare every output field the loss reads."""
        missing = sorted(self.reads - provides - {"embedding"})
        if missing:
            poolings = [
                name for name in POOLINGS.names() if set(missing) <= provides_of(POOLINGS.get(name))
            ]
            raise ConfigError(
                "model.pooling",
                f"the loss reads the embedder output's {', '.join(missing)}, which the "
                f"model does not provide (it provides: "
                f"{', '.join(sorted(provides | {'embedding'}))}); poolings that "
                f"provide them: {', '.join(poolings) or 'none'}",
            )


def provides_of(module: Any) -> frozenset[str]:
    """The :class:`~gspdml.models.EmbedderOutput` fields a module (or module class) declares it
    fills (class attribute ``provides``; none when undeclared)."""
    return frozenset(getattr(module, "provides", frozenset()))


def model_provides(model: nn.Module) -> frozenset[str]:
    """The output fields declared by any module of ``model`` (the embedder: ``local``, ``pooled``;
    its pooling: e.g. GSP's ``weights``, ``attributes``)."""
    return frozenset().union(*(provides_of(module) for module in model.modules()))


def requirements_of(loss: nn.Module) -> BatchRequirements:
    """The declaration of ``loss``; a module that declares none (a user loss) needs nothing."""
    declared = getattr(loss, "batch_requirements", None)
    return declared() if callable(declared) else BatchRequirements()


def combined(losses: Iterable[nn.Module]) -> BatchRequirements:
    """What several losses on the same batch need together."""
    total = BatchRequirements()
    for loss in losses:
        total = total.combine(requirements_of(loss))
    return total

"""A row of a supervised classification table as the model it trains and the data it trains on
(``gspdml reproduce``'s ``classify`` protocol, run by
:mod:`gspdml.workflows.reproduce.classify_run`; the protocol is
:mod:`gspdml.workflows.classification`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from gspdml.data.classification import READERS
from gspdml.workflows.classification import ClassificationRecipe
from gspdml.workflows.reproduce.frozen_spec import FrozenSpec


@dataclass(frozen=True)
class ClassifySpec:
    """One row's classifier: ``network`` (a registered backbone, randomly initialised) with the
    registered pooling ``pooling`` (its spec as ``(option, value)`` pairs, the name first), or
    the ``released`` model (its backbone and pooling, fine-tuned whole), then a linear layer to
    the dataset's classes; trained by ``recipe`` on the ``reader``'s training split found in
    ``folder`` under ``--data-root`` (the first ``fraction`` of each class), top-1 on its test
    split (``max_logits``: the classifier takes the maximum of the logits of the pooling's
    ``k`` vectors, :class:`~gspdml.workflows.classification.Classifier`); images cropped to ``crop`` (training: a random resized crop, scale 0.08-1, and a
    horizontal flip; test: resized to ``resize`` on the shorter side, center-cropped)."""

    reader: str
    folder: str
    recipe: ClassificationRecipe
    network: str = "resnet18"
    pooling: tuple[tuple[str, Any], ...] = (("name", "gap"),)
    released: Optional[FrozenSpec] = None
    fraction: float = 1.0
    max_logits: bool = False
    resize: int = 256
    crop: int = 224

    def __post_init__(self) -> None:
        if self.reader not in READERS:
            raise ValueError(f"unknown reader {self.reader!r}; one of {READERS}")

    def pooling_spec(self) -> dict[str, Any]:
        """The pooling spec (``{"name": ..., option: value}``) of :func:`gspdml.pooling.build_pooling`."""
        return {key: list(v) if isinstance(v, tuple) else v for key, v in self.pooling}

    def describe(self) -> str:
        """What trains, in a few words."""
        if self.released is not None:
            model = f"fine-tune {self.released.describe()}"
        else:
            options = ", ".join(f"{k}={v}" for k, v in self.pooling[1:])
            model = f"{self.network} + {self.pooling[0][1]}" + (f"({options})" if options else "")
            model += ", max of the k vectors' logits" if self.max_logits else ""
        part = f", first {self.fraction:.0%} per class" if self.fraction < 1 else ""
        return f"{model} + Linear; {self.reader}{part}; {self.recipe.describe()}"

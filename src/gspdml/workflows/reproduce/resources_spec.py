"""A row of a ``resources`` table as the model it counts (``gspdml reproduce``'s ``resources``
protocol, run by :mod:`gspdml.workflows.reproduce.resources_run`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from gspdml.models.resources import NETWORKS, POOLINGS

#: the input size of Psomas thesis Table 3.10's counts (ImageNet-1k at 224 x 224)
IMAGE_SIZE = 224


@dataclass(frozen=True)
class ResourceSpec:
    """The classifier a row counts (:func:`gspdml.models.resources.imagenet_classifier`):
    ``network`` (``depth``: a ViT's blocks, None: its own 12) with ``pooling`` and a linear
    layer to the 1000 ImageNet classes."""

    network: str
    pooling: str
    depth: Optional[int] = None

    def __post_init__(self) -> None:
        if self.network not in NETWORKS or self.pooling not in POOLINGS:
            raise ValueError(f"a classifier of {NETWORKS} with {POOLINGS}, not {self}")

    def describe(self) -> str:
        network = self.network if self.depth is None else f"{self.network} ({self.depth} blocks)"
        return f"{network} + {self.pooling} + Linear(1000), {IMAGE_SIZE} x {IMAGE_SIZE}"

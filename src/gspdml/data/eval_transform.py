"""The evaluation transform: one deterministic image -> tensor pipeline, described by a spec.

``EvalTransform(channels, resize, center_crop, mean, std, bgr, value_range)`` maps a PIL image
to a float tensor ``[C, H, W]`` with the steps of :mod:`gspdml.data.transforms`, in this order:

1. convert to ``channels`` (1: grey ``L``, 3: ``RGB``);
2. ``resize``: ``(s,)`` makes the shorter side ``s`` (aspect kept, longer side truncated),
   ``(h, w)`` resizes exactly (bilinear, as torchvision's ``Resize``);
3. ``center_crop`` ``(h, w)``: top-left corner ``round((H - h) / 2)``, ``round((W - w) / 2)``,
   an image smaller than the crop padded with black first (as torchvision's ``CenterCrop``);
4. pixels x to [0, 1], channels reversed when ``bgr`` (Caffe's BN-Inception), then
   ``(x · value_range - mean) / std`` per channel when ``mean``/``std`` are given.

The evaluation recipes of :func:`gspdml.data.recipes.image_transform`, the transform a retrieval
run applies to image files (:mod:`gspdml.retrieval.preprocessing`) and the one an exported bundle
records (``preprocessing.json``) are all this spec; CLIP's preprocessing
(:func:`gspdml.cir.backends.clip_preprocess`) is the same steps with bicubic resizing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Optional

import numpy as np
import torch
from PIL import Image

from gspdml.data.transforms import CenterCrop, Compose, Normalize, Resize, ToTensor


@dataclass(frozen=True)
class EvalTransform:
    """PIL image -> float tensor ``[C, H, W]``; see the module docstring for the steps."""

    channels: int
    resize: Optional[tuple[int, ...]] = None  # (shorter_side,) or (h, w)
    center_crop: Optional[tuple[int, int]] = None
    mean: Optional[tuple[float, ...]] = None
    std: Optional[tuple[float, ...]] = None
    bgr: bool = False
    value_range: float = 1.0

    @property
    def output_size(self) -> Optional[tuple[int, int]]:
        """``(h, w)`` of every output when the transform fixes it, else None."""
        if self.center_crop is not None:
            return self.center_crop
        if self.resize is not None and len(self.resize) == 2:
            return (self.resize[0], self.resize[1])
        return None

    @cached_property
    def pipeline(self) -> Compose:
        """Steps 2 to 4 as seeded transforms ``(x, generator) -> x`` of :mod:`gspdml.data.transforms`."""
        steps = []
        if self.resize is not None:
            steps.append(Resize(self.resize[0] if len(self.resize) == 1 else self.resize))
        if self.center_crop is not None:
            steps.append(CenterCrop(self.center_crop))
        steps.append(ToTensor())
        if self.mean is not None:
            steps.append(Normalize(self.mean, self.std, bgr=self.bgr, value_range=self.value_range))
        elif self.bgr:
            steps.append(Normalize((0.0,) * self.channels, (1.0,) * self.channels, bgr=True))
        return Compose(steps)

    def __call__(self, image: Image.Image, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        return self.pipeline(image.convert("L" if self.channels == 1 else "RGB"), generator)

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_display(self, tensor: torch.Tensor) -> np.ndarray:
        """Invert the normalisation: model input ``[C, H, W]`` -> image ``[H, W, C]`` in [0, 1]."""
        image = tensor.detach().float().cpu()
        if self.mean is not None:
            image = (image * torch.tensor(self.std).view(-1, 1, 1) + torch.tensor(self.mean).view(-1, 1, 1)) / self.value_range
        if self.bgr:
            image = image.flip(0)
        return display_range(image.permute(1, 2, 0).numpy())


def tensor_display(tensor: torch.Tensor) -> np.ndarray:
    """A model input ``[C, H, W]`` of unknown normalisation as a picture ``[H, W, C]`` in [0, 1]
    (:func:`display_range`)."""
    return display_range(tensor.detach().float().cpu().permute(1, 2, 0).numpy())


def display_range(image: np.ndarray) -> np.ndarray:
    """Images already in [0, 1] are kept; others (tensors of unknown normalisation) are min-max scaled."""
    low, high = float(image.min()), float(image.max())
    if low >= 0.0 and high <= 1.0:
        return image
    return (image - low) / max(high - low, 1e-12)

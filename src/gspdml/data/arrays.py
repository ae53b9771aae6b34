"""An in-memory image dataset over a uint8 array, normalised on access.

Used by the generated datasets (digit and Fashion-MNIST collages, Fashion-MNIST itself): the
images stay uint8 (a quarter of the memory of float32) and each item is returned as
``(x - mean) / std`` with ``x`` in [0, 1], a float tensor ``[C, H, W]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

import numpy as np
import torch

from gspdml.data.base import LabelledDataset


class ArrayDataset(LabelledDataset):
    """``images`` uint8 ``[N, H, W]`` (one channel) or ``[N, C, H, W]``; ``labels`` int ``[N]``.

    ``mean``/``std`` are per-dataset scalars applied to pixel values scaled to [0, 1]; pass the
    training split's statistics to every split so that all splits share one normalisation.
    """

    #: collages: the grid position of each image's target tile (set by the collage builders)
    tile_positions: Optional[np.ndarray] = None
    #: collages: the tiles per side of the grid those positions index (row-major)
    tile_grid: Optional[int] = None

    def __init__(
        self,
        images: np.ndarray,
        labels: np.ndarray,
        mean: float = 0.0,
        std: float = 1.0,
        class_names: Optional[Sequence[str]] = None,
    ):
        images = np.asarray(images)
        if images.dtype != np.uint8 or images.ndim not in (3, 4):
            raise ValueError(
                f"images must be uint8 [N,H,W] or [N,C,H,W], got {images.dtype} {images.shape}"
            )
        if images.ndim == 3:
            images = images[:, None]
        labels = np.asarray(labels, dtype=np.int64)
        if labels.shape != (len(images),):
            raise ValueError(f"labels must have shape ({len(images)},), got {labels.shape}")
        if not std > 0:
            raise ValueError(f"std must be positive, got {std}")
        self.images = torch.from_numpy(np.ascontiguousarray(images))
        self.labels = labels
        self.mean = float(mean)
        self.std = float(std)
        self.class_names = list(class_names) if class_names is not None else None

    @property
    def classes(self) -> np.ndarray:
        """The class ids of the split (its labels: generated splits number their own classes)."""
        return np.unique(self.labels)

    @property
    def channels(self) -> int:
        return int(self.images.shape[1])

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, key: Union[int, tuple[int, int]]) -> tuple[torch.Tensor, int]:
        """``key`` is an index or an ``(index, epoch)`` pair (the epoch does not matter here)."""
        index = int(key[0]) if isinstance(key, tuple) else int(key)
        image = self.images[index].to(torch.float32).div_(255.0)
        return image.sub_(self.mean).div_(self.std), int(self.labels[index])


def pixel_statistics(images: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of the pixel values of uint8 ``images`` scaled to [0, 1]."""
    values = np.asarray(images, dtype=np.float64) / 255.0
    return float(values.mean()), float(values.std())


def counted_pixel_statistics(images: np.ndarray) -> tuple[float, float]:
    """:func:`pixel_statistics` from the counts of the 256 pixel values (no float copy of the
    images: 50,000 CIFAR images would take 1.2 GB as float64); equal up to rounding."""
    counts = np.bincount(np.asarray(images, dtype=np.uint8).ravel(), minlength=256)
    values = np.arange(256, dtype=np.float64) / 255.0
    total = counts.sum()
    mean = float(counts @ values / total)
    return mean, float(np.sqrt(counts @ (values - mean) ** 2 / total))

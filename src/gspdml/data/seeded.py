"""Per-item augmentation that is reproducible regardless of DataLoader workers and resume.

The random state of item ``index`` in epoch ``epoch`` is a ``torch.Generator`` seeded from
``(seed, epoch, index)`` through numpy's ``SeedSequence`` (which hashes the tuple, so nearby
keys give unrelated streams). Nothing depends on the worker that loads the item or on what was
loaded before it.

The epoch reaches the workers by :meth:`SeededTransformDataset.set_epoch` before the DataLoader
iterator is created (without persistent workers), or in the ``(index, epoch)`` pairs the
trainer's samplers yield, so a training split follows :class:`TrainingDataset`
(docs/design.md, "Contracts").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch

from gspdml.data.base import LabelledDataset


def seeded_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """A generator whose stream is a pure function of ``(seed, epoch, index)``."""
    words = np.random.SeedSequence([int(seed), int(epoch), int(index)]).generate_state(2, np.uint32)
    generator = torch.Generator()
    generator.manual_seed((int(words[0]) << 32 | int(words[1])) & ((1 << 63) - 1))
    return generator


class TrainingDataset(Protocol):
    """The protocol of a training split.

    * ``dataset[(index, epoch)]`` is ``(image, label)``: ``image`` a float tensor ``[C, H, W]``,
      ``label`` an int in ``[0, num_classes)``; its augmentation is a function of
      ``(seed, epoch, index)`` alone (:func:`seeded_generator`). A plain integer ``index`` reads
      the item at the current epoch (``set_epoch``; 0 by default), as CCP's proxy pool and
      PCA-whitening do.
    * ``labels``: the int64 array of every item's label, read without decoding images (samplers).
    * ``len(dataset)`` items; optional ``channels`` (3 when absent), ``class_names`` and ``paths``.
    """

    labels: np.ndarray

    def __len__(self) -> int: ...

    def __getitem__(self, key: tuple[int, int] | int) -> tuple[torch.Tensor, int]: ...


#: ``transform(image, generator) -> image``, its randomness drawn from ``generator`` alone
SeededTransform = Callable[[Any, torch.Generator], Any]


class Items(Protocol):
    """What :class:`SeededTransformDataset` wraps: ``len`` and ``(image, label)`` by index."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


def item_labels(dataset: Items) -> np.ndarray:
    """The int64 label of every item: ``dataset.labels`` when it has them, else read once item
    by item (each image is decoded once)."""
    if hasattr(dataset, "labels"):
        return np.asarray(dataset.labels, dtype=np.int64)
    return np.asarray([int(dataset[i][1]) for i in range(len(dataset))], dtype=np.int64)


class SeededTransformDataset(LabelledDataset):
    """Wrap ``dataset`` (items ``(image, label)``, plain integer indices) and apply
    ``transform(image, generator)`` (None: none): the adapter of any such dataset to
    :class:`TrainingDataset`; ``labels``, ``classes``, ``paths``, ``channels`` and
    ``class_names`` are the wrapped dataset's (:func:`item_labels`)."""

    def __init__(self, dataset: Items, transform: SeededTransform | None = None, seed: int = 0):
        self.dataset = dataset
        self.transform = transform
        self.seed = int(seed)
        self.epoch = 0
        self.labels = item_labels(dataset)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getattr__(self, name: str) -> Any:
        if name in ("classes", "paths", "channels", "class_names"):
            return getattr(self.__dict__["dataset"], name)
        raise AttributeError(name)

    def __getitem__(self, key: tuple[int, int] | int) -> tuple[Any, Any]:
        index, epoch = key if isinstance(key, tuple) else (key, self.epoch)
        image, label = self.dataset[int(index)]
        if self.transform is None:
            return image, label
        return self.transform(image, seeded_generator(self.seed, epoch, index)), label

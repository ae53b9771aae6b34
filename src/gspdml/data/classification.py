"""The datasets of the supervised classification protocol (Psomas thesis Tables 3.4 and 3.12):
each read from its official layout into a training and a test split of ``(image tensor, label)``
with the transforms the protocol gives.

* ``cifar10`` / ``cifar100``: the python pickles (:mod:`gspdml.data.cifar`), train / test batch
  files; the 32 x 32 images go through the same PIL transforms as files do.
* ``flowers102``: the Oxford Flowers-102 release (:mod:`gspdml.data.flowers102`); the training
  split is ``trnid`` + ``valid`` (10 + 10 images per class), the test split ``tstid``.
* ``class_folders``: any dataset in the ImageFolder layout (:mod:`gspdml.data.class_folders`),
  the first ``fraction`` of each class's training images (ImageNet-20%: 0.2), tested on ``val``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np
from PIL import Image

from gspdml.data.base import LabelledDataset
from gspdml.data.cifar import load_cifar
from gspdml.data.class_folders import read_class_folders
from gspdml.data.eval_transform import EvalTransform
from gspdml.data.files import ImageFileDataset
from gspdml.data.flowers102 import read_flowers102
from gspdml.data.recipes import IMAGENET_MEAN, IMAGENET_STD
from gspdml.data.seeded import seeded_generator
from gspdml.data.transforms import (
    Compose,
    Normalize,
    RandomHorizontalFlip,
    RandomResizedCrop,
    ToTensor,
)

#: a seeded transform ``(PIL image, generator) -> tensor`` (:mod:`gspdml.data.recipes`)
Transform = Callable[..., Any]
#: the readers of :func:`classification_splits`
READERS = ("cifar10", "cifar100", "flowers102", "class_folders")


def classification_transforms(resize: int = 256, crop: int = 224) -> tuple[Compose, EvalTransform]:
    """The ImageNet classification transforms (torchvision's reference recipe, timm's default):
    training ``RandomResizedCrop(crop, scale=(0.08, 1), ratio=(3/4, 4/3))`` and a horizontal
    flip with probability 0.5; test ``Resize(resize)`` (shorter side) and ``CenterCrop(crop)``;
    both end in ImageNet's normalisation."""
    train = Compose(
        [
            RandomResizedCrop(crop, (0.08, 1.0), (3 / 4, 4 / 3)),
            RandomHorizontalFlip(0.5),
            ToTensor(),
            Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD),
        ]
    )
    test = EvalTransform(
        3, resize=(resize,), center_crop=(crop, crop), mean=IMAGENET_MEAN, std=IMAGENET_STD
    )
    return train, test


class PilArrayDataset(LabelledDataset):
    """uint8 images ``[N, 3, H, W]`` handed to ``transform`` as RGB PIL images, seeded per
    ``(seed, epoch, index)`` as :class:`~gspdml.data.files.ImageFileDataset` is."""

    channels = 3

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform: Transform, seed: int = 0):
        self.images, self.labels = images, np.asarray(labels, dtype=np.int64)
        self.transform, self.seed, self.epoch = transform, int(seed), 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        image = Image.fromarray(np.ascontiguousarray(self.images[index].transpose(1, 2, 0)), "RGB")
        generator = seeded_generator(self.seed, self.epoch, int(index))
        return self.transform(image, generator), int(self.labels[index])


@dataclass(frozen=True)
class ClassificationSplits:
    """The training and test splits and the classifier's number of classes."""

    train: Union[PilArrayDataset, ImageFileDataset]
    test: Union[PilArrayDataset, ImageFileDataset]
    num_classes: int


def classification_splits(
    reader: str,
    folder: Path,
    train_transform: Transform,
    test_transform: Transform,
    *,
    fraction: float = 1.0,
    seed: int = 0,
) -> ClassificationSplits:
    """The splits of ``reader`` (:data:`READERS`, module doc) under ``folder``."""
    if reader in ("cifar10", "cifar100"):
        data = load_cifar(reader, str(folder))
        train: Union[PilArrayDataset, ImageFileDataset] = PilArrayDataset(
            data.train, data.train_labels, train_transform, seed
        )
        test: Union[PilArrayDataset, ImageFileDataset] = PilArrayDataset(
            data.test, data.test_labels, test_transform, seed
        )
        return ClassificationSplits(train, test, len(data.names))
    if reader == "flowers102":
        flowers = read_flowers102(folder)
        (paths, labels), (test_paths, test_labels) = (
            flowers.part("train", "val"),
            flowers.part("test"),
        )
        train = ImageFileDataset([str(p) for p in paths], labels, train_transform, seed=seed)
        test = ImageFileDataset(
            [str(p) for p in test_paths], test_labels, test_transform, seed=seed
        )
        return ClassificationSplits(train, test, int(flowers.labels.max()) + 1)
    if reader == "class_folders":
        part = read_class_folders(folder, "train", fraction)
        val = read_class_folders(folder, "val")
        train = ImageFileDataset(
            [str(p) for p in part.paths], part.labels, train_transform, seed=seed
        )
        test = ImageFileDataset([str(p) for p in val.paths], val.labels, test_transform, seed=seed)
        return ClassificationSplits(train, test, len(part.class_names))
    raise ValueError(f"unknown reader {reader!r}; one of {READERS}")

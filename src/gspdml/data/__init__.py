"""Datasets, samplers and transforms; dataset factories are registered in :data:`DATASETS`.

Registered datasets: ``collage_digits`` (embedded default), ``collage_fashion``,
``fashion_mnist``, ``collage_shared``, ``collage_cifar``, ``cifar10``, ``cifar100``, ``cub200``, ``cars196``, ``sop``, ``inshop``, ``image_folder``, ``csv``.
"""

from gspdml.data import (  # noqa: F401  (register datasets)
    cars,
    cifar,
    cifar_collage,
    collage,
    cub,
    fashion_mnist,
    folder,
    inshop,
    shared_collage,
    sop,
)
from gspdml.data.base import DATASETS, DataSplits, EvalSplit, build_data
from gspdml.data.files import ImageFileDataset
from gspdml.data.images import load_image
from gspdml.data.recipes import image_transform
from gspdml.data.samplers import ClassBalancedBatchSampler
from gspdml.data.seeded import SeededTransformDataset, seeded_generator
from gspdml.data.splits import ClassSubset, validation_classes

__all__ = [
    "DATASETS",
    "DataSplits",
    "EvalSplit",
    "build_data",
    "ClassBalancedBatchSampler",
    "SeededTransformDataset",
    "seeded_generator",
    "ImageFileDataset",
    "load_image",
    "image_transform",
    "ClassSubset",
    "validation_classes",
]

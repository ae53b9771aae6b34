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
from gspdml.data.images import load_image

__all__ = ["DATASETS", "DataSplits", "EvalSplit", "build_data", "load_image"]

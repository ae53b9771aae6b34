"""Datasets, samplers and transforms; dataset factories are registered in :data:`DATASETS`."""

from gspdml.data.base import DATASETS, DataSplits, EvalSplit, build_data
from gspdml.data import digits  # noqa: F401  (registers collage_digits)
from gspdml.data.samplers import ClassBalancedBatchSampler
from gspdml.data.seeded import SeededTransformDataset, seeded_generator

__all__ = ["DATASETS", "DataSplits", "EvalSplit", "build_data", "ClassBalancedBatchSampler",
           "SeededTransformDataset", "seeded_generator"]

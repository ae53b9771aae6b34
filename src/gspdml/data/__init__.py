"""Datasets, samplers and transforms; dataset factories are registered in :data:`DATASETS`."""

from gspdml.data.base import DATASETS, DataSplits, EvalSplit, build_data

__all__ = ["DATASETS", "DataSplits", "EvalSplit", "build_data"]

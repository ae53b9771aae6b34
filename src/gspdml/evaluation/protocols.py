"""Class splits of the evaluation protocols (thesis spec §5.4, §7.2; ecosystem.md §1.2).

Every split is a list of class ids, so that a dataset can be subset by classes. The fold rule
itself (:func:`~gspdml.data.splits.contiguous_class_folds`, powerful-benchmarker's wrap-around
``MLRCSplitManager``) and the 50/50 train/test rule (:func:`~gspdml.data.splits.train_test_classes`)
live in :mod:`gspdml.data.splits`, so that a dataset built with ``val_fold: f`` trains on exactly
the classes of fold f here. The protocols:

- :func:`fair_protocol_folds`: 4 folds (3/4 train, 1/4 validation), the fair protocol (§7.2);
- :func:`tuning_protocol_folds`: 5 folds (4/5 train, 1/5 validation), the hyper-parameter tuning
  protocol of thesis §5.3 (L1302).
"""

from __future__ import annotations

from gspdml.data.splits import ClassFold, contiguous_class_folds, train_test_classes

FAIR_FOLDS = 4
TUNING_FOLDS = 5

__all__ = ["FAIR_FOLDS", "TUNING_FOLDS", "ClassFold", "contiguous_class_folds", "fair_protocol_folds",
           "train_test_classes", "tuning_protocol_folds"]


def fair_protocol_folds(train_classes, num_folds: int = FAIR_FOLDS) -> list[ClassFold]:
    """Fair (Musgrave) protocol: 4 folds, each training on 3/4 of the training classes."""
    return contiguous_class_folds(train_classes, num_folds)


def tuning_protocol_folds(train_classes, num_folds: int = TUNING_FOLDS) -> list[ClassFold]:
    """Hyper-parameter tuning protocol: 5 class partitions, train on 4/5, validate on 1/5."""
    return contiguous_class_folds(train_classes, num_folds)

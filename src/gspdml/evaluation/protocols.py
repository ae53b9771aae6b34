"""Class splits of the evaluation protocols (thesis spec §5.4, §7.2; ecosystem.md §1.2).

Every split is a list of class ids, so that a dataset can be subset by classes:

- :func:`train_test_classes`: the class-disjoint 50/50 split by sorted class id (first half trains).
- :func:`contiguous_class_folds`: the fair protocol's folds over the training classes, as
  powerful-benchmarker's ``MLRCSplitManager`` builds them: with T sorted training classes and F
  folds, the validation block has ``T // F`` classes, the training block the other
  ``T - T // F``; fold f starts its training block at position ``int(f / F * T)`` and takes the
  next ``T - T // F`` classes, wrapping around the end of the list, then validates on the next
  ``T // F`` (wrapping as well). CUB (T = 100): fold 0 trains on 0-74 and validates on 75-99,
  fold 1 trains on 25-99 and validates on 0-24. Cars (T = 98): 74 train / 24 validation classes.
  Difference from the reference code: for an odd total number of classes its block lengths come
  from the total count and the last training class of a fold is also its first validation class;
  here the blocks of a fold never overlap.
- :func:`fair_protocol_folds`: 4 folds (3/4 train, 1/4 validation), the fair protocol;
  :func:`tuning_protocol_folds`: 5 folds (4/5 train, 1/5 validation), the hyper-parameter tuning
  protocol of thesis §5.3 (L1302).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gspdml.errors import ConfigError


@dataclass(frozen=True)
class ClassFold:
    """One fold: the classes a model trains on and the (disjoint) classes it validates on."""

    index: int
    train_classes: np.ndarray
    val_classes: np.ndarray


def train_test_classes(classes) -> tuple[np.ndarray, np.ndarray]:
    """``(train classes, test classes)``: the first ``C // 2`` sorted distinct class ids train,
    the rest test (CUB 100/100, Cars 98/98; powerful-benchmarker's 50/50 class split)."""
    ids = _sorted_classes(classes, "classes")
    if len(ids) < 2:
        raise ConfigError("classes", f"need at least 2 classes for a train/test split, got {len(ids)}")
    half = len(ids) // 2
    return ids[:half], ids[half:]


def contiguous_class_folds(train_classes, num_folds: int) -> list[ClassFold]:
    """The ``num_folds`` wrap-around contiguous folds of the sorted training classes (module doc)."""
    ids = _sorted_classes(train_classes, "train_classes")
    total = len(ids)
    if not 2 <= num_folds <= total:
        raise ConfigError("num_folds", f"must be in [2, {total}] (number of training classes), got {num_folds}")
    val_len = total // num_folds
    train_len = total - val_len
    folds = []
    for fold in range(num_folds):
        start = int(float(fold) / num_folds * total)
        positions = (start + np.arange(total)) % total
        folds.append(ClassFold(fold, np.sort(ids[positions[:train_len]]), np.sort(ids[positions[train_len:]])))
    return folds


def fair_protocol_folds(train_classes, num_folds: int = 4) -> list[ClassFold]:
    """Fair (Musgrave) protocol: 4 folds, each training on 3/4 of the training classes."""
    return contiguous_class_folds(train_classes, num_folds)


def tuning_protocol_folds(train_classes, num_folds: int = 5) -> list[ClassFold]:
    """Hyper-parameter tuning protocol: 5 class partitions, train on 4/5, validate on 1/5."""
    return contiguous_class_folds(train_classes, num_folds)


def _sorted_classes(classes, field) -> np.ndarray:
    ids = np.asarray(classes)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ConfigError(field, f"expected a 1-D array of integer class ids, got shape {ids.shape} dtype {ids.dtype}")
    return np.unique(ids.astype(np.int64))

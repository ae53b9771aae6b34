"""Class-disjoint (zero-shot) splits: train/test classes, protocol folds, validation classes,
class subsets and relabelling; the one definition of the class splits of the evaluation protocols.

Deep metric learning is evaluated on classes never seen in training (Gürbüz thesis §5.3.4.1).
Validation classes are carved off the training classes, never off the test classes, so that model
selection never looks at the test split (the fair protocol of §7.2).

- :func:`contiguous_class_folds`: the folds over the training classes, as powerful-benchmarker's
  ``MLRCSplitManager`` builds them (Musgrave et al., ECCV 2020): with T sorted training classes and F
  folds, the validation block has ``T // F`` classes, the training block the other
  ``T - T // F``; fold f starts its training block at position ``int(f / F * T)`` and takes the
  next ``T - T // F`` classes, wrapping around the end of the list, then validates on the next
  ``T // F`` (wrapping as well). CUB (T = 100): fold 0 trains on 0-74 and validates on 75-99,
  fold 1 trains on 25-99 and validates on 0-24. Cars (T = 98): 74 train / 24 validation classes.
  Difference from the reference code: for an odd total number of classes its block lengths come
  from the total count and the last training class of a fold is also its first validation class;
  here the blocks of a fold never overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np
import numpy.typing as npt

from gspdml.data.base import DataSplits, EvalSplit, LabelledDataset
from gspdml.errors import ConfigError

FIELD = "data.dataset"
FAIR_FOLDS = 4
TUNING_FOLDS = 5


@dataclass(frozen=True)
class ClassFold:
    """One fold: the classes a model trains on and the (disjoint) classes it validates on."""

    index: int
    train_classes: np.ndarray
    val_classes: np.ndarray


def train_test_classes(classes: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """``(train classes, test classes)``: the first ``C // 2`` sorted distinct class ids train,
    the rest test (CUB 100/100, Cars 98/98; powerful-benchmarker's 50/50 class split)."""
    ids = _sorted_classes(classes, "classes")
    if len(ids) < 2:
        raise ConfigError(
            "classes", f"need at least 2 classes for a train/test split, got {len(ids)}"
        )
    half = len(ids) // 2
    return ids[:half], ids[half:]


def contiguous_class_folds(
    train_classes: npt.ArrayLike, num_folds: int, field: str = "num_folds"
) -> list[ClassFold]:
    """The ``num_folds`` wrap-around contiguous folds of the sorted training classes (module doc)."""
    ids = _sorted_classes(train_classes, "train_classes")
    total = len(ids)
    if not 2 <= num_folds <= total:
        raise ConfigError(
            field, f"must be in [2, {total}] (number of training classes), got {num_folds}"
        )
    val_len = total // num_folds
    train_len = total - val_len
    folds = []
    for fold in range(num_folds):
        start = int(float(fold) / num_folds * total)
        positions = (start + np.arange(total)) % total
        folds.append(
            ClassFold(
                fold, np.sort(ids[positions[:train_len]]), np.sort(ids[positions[train_len:]])
            )
        )
    return folds


def fair_protocol_folds(
    train_classes: npt.ArrayLike, num_folds: int = FAIR_FOLDS
) -> list[ClassFold]:
    """Fair (Musgrave) protocol (Gürbüz thesis §7.2): 4 folds, each training on 3/4 of the
    training classes."""
    return contiguous_class_folds(train_classes, num_folds)


def tuning_protocol_folds(
    train_classes: npt.ArrayLike, num_folds: int = TUNING_FOLDS
) -> list[ClassFold]:
    """Hyper-parameter tuning protocol (Gürbüz thesis §5.3.4.1): 5 class partitions, train on 4/5,
    validate on 1/5."""
    return contiguous_class_folds(train_classes, num_folds)


def _sorted_classes(classes: npt.ArrayLike, field: str) -> np.ndarray:
    ids = np.asarray(classes)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ConfigError(
            field,
            f"expected a 1-D array of integer class ids, got shape {ids.shape} dtype {ids.dtype}",
        )
    return np.unique(ids.astype(np.int64))


def contiguous_labels(labels: npt.ArrayLike, classes: npt.ArrayLike) -> np.ndarray:
    """Map each label to its position in ``sorted(classes)`` (labels must all be in ``classes``)."""
    order = np.unique(np.asarray(classes))
    labels = np.asarray(labels)
    position = np.searchsorted(order, labels)
    if len(labels) and (
        position.max() >= len(order) or not np.array_equal(order[position], labels)
    ):
        raise ValueError("some labels are not in the given classes")
    return position.astype(np.int64)


class ClassSubset(LabelledDataset):
    """The items of ``dataset`` whose label is in ``classes``; with ``relabel`` their labels become
    positions in ``sorted(classes)`` (contiguous ``0..k-1``, as a training split needs), and
    :attr:`classes` keeps the sorted labels of ``dataset`` they stand for.

    Keys may be ints or ``(index, epoch)`` pairs, passed on to ``dataset`` with the index mapped.
    """

    def __init__(self, dataset: LabelledDataset, classes: npt.ArrayLike, relabel: bool = True):
        classes = np.unique(np.asarray(classes, dtype=np.int64))
        base_labels = np.asarray(dataset.labels)
        absent = np.setdiff1d(classes, base_labels)
        if len(absent):
            raise ConfigError(
                f"{FIELD}.classes",
                f"{len(absent)} classes are not in the dataset, e.g. {absent[:5].tolist()}",
            )
        self.dataset = dataset
        self.classes = classes
        self.indices = np.flatnonzero(np.isin(base_labels, classes))
        self.original_labels = base_labels[self.indices]
        self.labels = (
            contiguous_labels(self.original_labels, classes)
            if relabel
            else self.original_labels.copy()
        )
        names = getattr(dataset, "class_names", None)
        self.class_names = [names[c] for c in classes] if (names is not None and relabel) else names
        paths = getattr(dataset, "paths", None)
        if paths is not None:
            self.paths = [paths[i] for i in self.indices]

    @property
    def channels(self) -> int:
        return int(getattr(self.dataset, "channels", 3))

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, key: Union[int, tuple[int, int]]) -> tuple[Any, int]:
        index = key[0] if isinstance(key, tuple) else key
        inner = int(self.indices[index])
        item = self.dataset[(inner, key[1]) if isinstance(key, tuple) else inner]
        return item[0], int(self.labels[index])


def validation_classes(
    train_classes: npt.ArrayLike,
    val_fraction: float = 0.25,
    val_fold: Optional[int] = None,
    num_folds: int = 4,
    val_classes: Optional[Sequence[int]] = None,
    minimum: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Split the training classes into ``(fit classes, validation classes)``, class-disjoint.
    Fold f of :func:`contiguous_class_folds` (Gürbüz thesis §5.3.4.1) validates, for f = 0, on the
    last ``C // num_folds`` classes, for f = 1 on the first ones, ...; a ``val_fraction`` gives at
    least ``minimum`` classes while as many training classes are left (a validation split of one
    class cannot rank anything).

    Args:
        val_fraction: without ``val_fold`` / ``val_classes``: the share of the training classes that
            validates (the last ones; 0: no validation split).
        val_fold: validate on fold ``f`` of ``num_folds`` contiguous class folds (the fair
            protocol).
        num_folds: the number of class folds of ``val_fold``.
        val_classes: an explicit list of the training classes that validate (not with ``val_fold``).
    """
    classes = np.unique(np.asarray(train_classes, dtype=np.int64))
    if val_classes is not None and val_fold is not None:
        raise ConfigError(f"{FIELD}.val_classes", "give either val_classes or val_fold, not both")
    if val_classes is not None:
        val = np.unique(np.asarray(val_classes, dtype=np.int64))
        outside = np.setdiff1d(val, classes)
        if len(outside):
            raise ConfigError(
                f"{FIELD}.val_classes",
                f"{len(outside)} are not training classes, e.g. {outside[:5].tolist()}",
            )
    elif val_fold is not None:
        folds = contiguous_class_folds(classes, num_folds, f"{FIELD}.num_folds")
        if not 0 <= val_fold < num_folds:
            raise ConfigError(
                f"{FIELD}.val_fold", f"must be in [0, {num_folds - 1}], got {val_fold}"
            )
        val = folds[val_fold].val_classes
    else:
        if not 0 <= val_fraction < 1:
            raise ConfigError(f"{FIELD}.val_fraction", f"must be in [0, 1), got {val_fraction}")
        count = int(round(val_fraction * len(classes)))
        if val_fraction > 0:
            count = max(count, min(minimum, len(classes) - minimum), 1)
        val = classes[len(classes) - count :]
    fit = np.setdiff1d(classes, val)
    if len(fit) == 0:
        given = "val_fold" if val_fold is not None else None
        given = "val_classes" if val_classes is not None else given
        raise ConfigError(
            f"{FIELD}.{given or 'val_fraction'}",
            f"the training classes ({len(classes)} after the test split) all went to validation "
            f"({'the classes you listed' if given else f'val_fraction {val_fraction}'}), so none "
            "is left to train on; give the dataset more classes, or fewer test classes (for an "
            "image folder: a smaller data.dataset.test_fraction), or no validation split "
            "(data.dataset.val_fraction=0 with evaluation.restore_best=false "
            "evaluation.patience=null)",
        )
    return fit, val


def carve_fold(
    train: LabelledDataset,
    val: Optional[LabelledDataset],
    test: Optional[LabelledDataset],
    *,
    dataset: str,
    val_fold: Optional[int],
    num_folds: int,
    val_classes: Optional[Sequence[int]],
) -> DataSplits:
    """The splits of a dataset with its own class-disjoint ``train``, ``val`` and ``test``
    (collages, Fashion-MNIST): unchanged without ``val_fold`` / ``val_classes``; otherwise the
    validation classes are carved off the training split (:func:`validation_classes`, both parts
    relabelled ``0..k-1``), which needs a dataset without validation classes of its own."""
    if val_fold is not None or val_classes is not None:
        if val is not None:
            option = "val_fold" if val_fold is not None else "val_classes"
            raise ConfigError(
                f"{FIELD}.{option}",
                f"dataset {dataset!r} already has {len(np.unique(val.labels))} validation "
                "classes of its own (class_split[1]); set class_split[1] to 0 so that the "
                "validation classes are carved off the training classes",
            )
        fit, held_out = validation_classes(
            np.unique(train.labels), 0.0, val_fold, num_folds, val_classes
        )
        train, val = ClassSubset(train, fit), ClassSubset(train, held_out)
    return DataSplits(
        train=train,
        val=EvalSplit(val) if val is not None else None,
        test=EvalSplit(test) if test is not None else None,
    )

"""Class-disjoint (zero-shot) splits: class subsets, validation classes, relabelling.

Deep metric learning is evaluated on classes never seen in training (spec/gurbuz-thesis-spec.md
§7.1; CUB 100/100, Cars 98/98, SOP 11,318/11,316, In-Shop 3,997/3,985 classes). Validation
classes are carved off the training classes, never off the test classes, so that model
selection never looks at the test split (the fair protocol of §7.2).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from torch.utils.data import Dataset

from gspdml.errors import ConfigError

FIELD = "data.dataset"


def contiguous_labels(labels: np.ndarray, classes: Sequence[int]) -> np.ndarray:
    """Map each label to its position in ``sorted(classes)`` (labels must all be in ``classes``)."""
    order = np.unique(np.asarray(classes))
    labels = np.asarray(labels)
    position = np.searchsorted(order, labels)
    if len(labels) and (position.max() >= len(order) or not np.array_equal(order[position], labels)):
        raise ValueError("some labels are not in the given classes")
    return position.astype(np.int64)


class ClassSubset(Dataset):
    """The items of ``dataset`` whose label is in ``classes``; with ``relabel`` their labels become
    positions in ``sorted(classes)`` (contiguous ``0..k-1``, as a training split needs).

    Keys may be ints or ``(index, epoch)`` pairs, passed on to ``dataset`` with the index mapped.
    """

    def __init__(self, dataset: Dataset, classes: Sequence[int], relabel: bool = True):
        classes = np.unique(np.asarray(classes, dtype=np.int64))
        base_labels = np.asarray(dataset.labels)
        absent = np.setdiff1d(classes, base_labels)
        if len(absent):
            raise ConfigError(f"{FIELD}.classes", f"{len(absent)} classes are not in the dataset, e.g. {absent[:5].tolist()}")
        self.dataset = dataset
        self.classes = classes
        self.indices = np.flatnonzero(np.isin(base_labels, classes))
        self.original_labels = base_labels[self.indices]
        self.labels = contiguous_labels(self.original_labels, classes) if relabel else self.original_labels.copy()
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

    def __getitem__(self, key):
        if isinstance(key, tuple):
            item = self.dataset[(int(self.indices[key[0]]), key[1])]
        else:
            item = self.dataset[int(self.indices[key])]
        return item[0], int(self.labels[key[0] if isinstance(key, tuple) else key])


def validation_classes(
    train_classes: Sequence[int],
    val_fraction: float = 0.25,
    val_fold: Optional[int] = None,
    num_folds: int = 4,
    val_classes: Optional[Sequence[int]] = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Split the training classes into ``(fit classes, validation classes)``, class-disjoint.

    * ``val_classes``: an explicit list (e.g. a fold of the evaluation protocol);
    * ``val_fold`` f of ``num_folds``: the f-th of ``num_folds`` contiguous, near-equal blocks of
      the sorted training classes (the fair protocol, spec §7.2 step 2);
    * otherwise the last ``round(val_fraction · C)`` sorted classes (0 = no validation split).
    """
    classes = np.unique(np.asarray(train_classes, dtype=np.int64))
    if val_classes is not None and val_fold is not None:
        raise ConfigError(f"{FIELD}.val_classes", "give either val_classes or val_fold, not both")
    if val_classes is not None:
        val = np.unique(np.asarray(val_classes, dtype=np.int64))
        outside = np.setdiff1d(val, classes)
        if len(outside):
            raise ConfigError(f"{FIELD}.val_classes", f"{len(outside)} are not training classes, e.g. {outside[:5].tolist()}")
    elif val_fold is not None:
        if not 2 <= num_folds <= len(classes):
            raise ConfigError(f"{FIELD}.num_folds", f"must be in [2, {len(classes)}], got {num_folds}")
        if not 0 <= val_fold < num_folds:
            raise ConfigError(f"{FIELD}.val_fold", f"must be in [0, {num_folds - 1}], got {val_fold}")
        val = np.array_split(classes, num_folds)[val_fold]
    else:
        if not 0 <= val_fraction < 1:
            raise ConfigError(f"{FIELD}.val_fraction", f"must be in [0, 1), got {val_fraction}")
        count = int(round(val_fraction * len(classes)))
        if val_fraction > 0:
            count = max(count, 1)
        val = classes[len(classes) - count:]
    fit = np.setdiff1d(classes, val)
    if len(fit) == 0:
        raise ConfigError(f"{FIELD}.val_classes", "no training classes are left after taking the validation classes")
    return fit, val

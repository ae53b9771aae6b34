import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from gspdml.data.splits import ClassSubset, contiguous_labels, validation_classes
from gspdml.errors import ConfigError


class Labelled(TensorDataset):
    def __init__(self, labels):
        super().__init__(torch.arange(len(labels)), torch.as_tensor(labels))
        self.labels = np.asarray(labels)
        self.paths = [f"img{i}" for i in range(len(labels))]
        self.class_names = {c: f"class{c}" for c in set(labels)}


def test_class_subset_relabels_and_keeps_items():
    base = Labelled([5, 3, 9, 3, 5, 7])
    sub = ClassSubset(base, [9, 3])
    assert sub.indices.tolist() == [1, 2, 3] and sub.labels.tolist() == [0, 1, 0]
    assert [sub[i][0].item() for i in range(3)] == [1, 2, 3] and [sub[i][1] for i in range(3)] == [
        0,
        1,
        0,
    ]
    assert sub.paths == ["img1", "img2", "img3"] and sub.class_names == ["class3", "class9"]
    kept = ClassSubset(base, [9, 3], relabel=False)
    assert kept.labels.tolist() == [3, 9, 3] and kept[1][1] == 9
    with pytest.raises(ConfigError, match=r"not in the dataset, e.g. \[4\]"):
        ClassSubset(base, [3, 4])


def test_validation_classes_variants():
    classes = np.arange(10, 30)  # 20 training classes
    fit, val = validation_classes(classes, val_fraction=0.25)
    assert val.tolist() == list(range(25, 30)) and fit.tolist() == list(range(10, 25))
    # fold f trains on the 15 classes from position 5f (wrapping) and validates on the next 5
    blocks = [validation_classes(classes, val_fold=f, num_folds=4)[1].tolist() for f in range(4)]
    assert blocks == [list(range(25, 30))] + [
        list(range(10 + 5 * (f - 1), 15 + 5 * (f - 1))) for f in range(1, 4)
    ]
    # 10 classes, 4 folds: 2 validation classes each, training blocks start at int(f * 10 / 4) = 0, 2, 5, 7
    uneven = [
        validation_classes(np.arange(10), val_fold=f, num_folds=4)[1].tolist() for f in range(4)
    ]
    assert uneven == [[8, 9], [0, 1], [3, 4], [5, 6]]
    fit, val = validation_classes(classes, val_classes=[12, 20])
    assert val.tolist() == [12, 20] and len(fit) == 18 and not set(fit) & set(val)
    assert len(validation_classes(classes, val_fraction=0)[1]) == 0
    with pytest.raises(ConfigError, match="val_fold"):
        validation_classes(classes, val_fold=4, num_folds=4)
    with pytest.raises(ConfigError, match="either val_classes or val_fold"):
        validation_classes(classes, val_fold=0, val_classes=[10])


def test_contiguous_labels():
    assert contiguous_labels(np.array([30, 10, 20, 10]), [20, 10, 30]).tolist() == [2, 0, 1, 0]
    with pytest.raises(ValueError):
        contiguous_labels(np.array([1, 5]), [1, 2])

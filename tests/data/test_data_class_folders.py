"""ImageFolder trees (train/<class>/, val/<class>/) and their first fraction per class:
ImageNet-20% as Psomas thesis §3.4.1 defines it."""

import math

import pytest

from gspdml.data.class_folders import first_fraction, read_class_folders
from gspdml.errors import DataError
from tests.helpers.datasets import write_image

COUNTS = {"n02": 7, "n01": 10, "n03": 1}


def make_tree(root, counts=COUNTS, val=2):
    for name, count in counts.items():
        for i in reversed(range(count)):  # written out of order: the reader sorts
            write_image(root / "train" / name / f"{name}_{i:04d}.JPEG", seed=i, fmt="JPEG")
        for i in range(val):
            write_image(root / "val" / name / f"val_{name}_{i}.JPEG", seed=i, fmt="JPEG")
    return root


def test_the_first_fifth_of_each_class_by_file_name(tmp_path):
    root = make_tree(tmp_path)
    part = read_class_folders(root, "train", 0.2)
    assert part.class_names == ["n01", "n02", "n03"]
    expected = [
        f"{name}_{i:04d}.JPEG"
        for name in sorted(COUNTS)
        for i in range(max(1, math.ceil(0.2 * COUNTS[name])))
    ]
    assert [p.name for p in part.paths] == expected  # 2 of 10, 2 of 7, 1 of 1
    assert part.labels.tolist() == [0, 0, 1, 1, 2]
    val = read_class_folders(root, "val")
    assert len(val.paths) == 6 and val.labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert first_fraction(1300, 0.2) == 260  # the authors' --subset 260 of ImageNet's classes


def test_a_val_class_that_train_lacks_and_an_empty_class_are_errors(tmp_path):
    root = make_tree(tmp_path / "a")
    write_image(root / "val" / "n09" / "x.JPEG")
    with pytest.raises(DataError, match=r"val/n09: a class folder that .*train lacks"):
        read_class_folders(root, "val")
    root = make_tree(tmp_path / "b")
    (root / "train" / "n04").mkdir()
    with pytest.raises(DataError, match=r"train/n04: no images of class 'n04'"):
        read_class_folders(root, "train", 0.2)

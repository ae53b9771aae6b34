"""The ImageNet-1k reader (gspdml.data.imagenet) on tiny trees in the official ILSVRC2012
layouts: the validation labels read from class folders, from ``LOC_val_solution.csv`` and from
the devkit's ground truth (its class ids mapped through ``meta.mat``) are the ones the tree was
written with, the class order is ``LOC_synset_mapping.txt``'s, the training subsets keep the
first images of each class, and a broken tree is an error that names the file."""

from pathlib import Path

import numpy as np
import pytest

from gspdml.data.imagenet import read_imagenet
from gspdml.errors import ConfigError, DataError
from tests.helpers.datasets import make_imagenet


def _expected_val(truth: dict, wnids: list) -> dict:
    """{validation file name: label} as the tree was written."""
    return {name: wnids.index(wnid) for name, wnid in truth.items()}


@pytest.mark.parametrize("layout", ["folders", "solution", "devkit"])
def test_every_validation_layout_gives_the_written_labels(tmp_path, write_image, layout):
    wnids, truth = make_imagenet(tmp_path, write_image, classes=3, val=layout)
    data = read_imagenet(tmp_path)
    assert data.wnids == tuple(wnids) and not data.skipped
    got = {Path(p).name: int(label) for p, label in zip(data.val.paths, data.val.labels)}
    assert got == _expected_val(truth, wnids)
    train = {Path(p).name: int(label) for p, label in zip(data.train.paths, data.train.labels)}
    assert len(train) == 12
    assert all(name.startswith(wnids[label]) for name, label in train.items())


def test_the_mapping_file_orders_the_classes(tmp_path, write_image):
    wnids, truth = make_imagenet(tmp_path, write_image, classes=3)
    mapping = tmp_path / "LOC_synset_mapping.txt"
    lines = mapping.read_text().splitlines()
    mapping.write_text("\n".join(reversed(lines)) + "\n")
    data = read_imagenet(tmp_path)
    assert data.wnids == tuple(reversed(wnids))
    for path, label in zip(data.train.paths, data.train.labels):
        assert Path(path).parent.name == data.wnids[label]


def test_subsets_keep_the_first_images_of_each_class(tmp_path, write_image):
    wnids, _ = make_imagenet(tmp_path, write_image, classes=2, train_per_class=5)
    full = read_imagenet(tmp_path)
    for subset, count in (
        (read_imagenet(tmp_path, fraction=0.2), 1),
        (read_imagenet(tmp_path, fraction=0.5), 3),
        (read_imagenet(tmp_path, per_class=2), 2),
    ):
        assert np.bincount(subset.train.labels).tolist() == [count, count]
        for c in range(2):
            first = [p for p, label in zip(full.train.paths, full.train.labels) if label == c]
            kept = [p for p, label in zip(subset.train.paths, subset.train.labels) if label == c]
            assert kept == sorted(first)[:count]
        assert subset.val.paths == full.val.paths  # the validation set is always whole
    with pytest.raises(DataError, match="5 images, fewer than the 6 per class"):
        read_imagenet(tmp_path, per_class=6)
    with pytest.raises(ConfigError, match="fraction"):
        read_imagenet(tmp_path, fraction=0)


def test_hidden_entries_are_reported_not_read(tmp_path, write_image):
    make_imagenet(tmp_path, write_image, classes=2)
    write_image(tmp_path / "train" / ".cache" / "x.JPEG")
    write_image(tmp_path / "train" / "n01440764" / ".hidden.JPEG")
    data = read_imagenet(tmp_path)
    assert len(data.train) == 8
    assert sorted(Path(p).name for p in data.skipped) == [".cache", ".hidden.JPEG"]


def test_broken_trees_are_errors_naming_the_file(tmp_path, write_image):
    _, truth = make_imagenet(tmp_path, write_image, classes=2, val="solution")
    solution = tmp_path / "LOC_val_solution.csv"
    text = solution.read_text()
    solution.write_text(text.replace("n01441764", "n09999999", 1))
    with pytest.raises(DataError, match=r"LOC_val_solution.csv:\d+: class 'n09999999'"):
        read_imagenet(tmp_path)
    solution.write_text("\n".join(text.splitlines()[:-1]))  # the last image has no label
    with pytest.raises(DataError, match="no label for 1 images"):
        read_imagenet(tmp_path)
    solution.unlink()
    with pytest.raises(DataError, match="flat validation images need their labels"):
        read_imagenet(tmp_path)
    (tmp_path / "train" / "n09999999").mkdir()
    with pytest.raises(DataError, match=r"class folders \['n09999999'\] are not in"):
        read_imagenet(tmp_path)
    with pytest.raises(DataError, match="missing .*train"):
        read_imagenet(tmp_path / "nothing")


def test_a_devkit_truth_of_another_length_is_refused(tmp_path, write_image):
    make_imagenet(tmp_path, write_image, classes=2, val="devkit")
    truth = tmp_path / "ILSVRC2012_devkit_t12" / "data" / "ILSVRC2012_validation_ground_truth.txt"
    truth.write_text(truth.read_text() + "1\n")
    with pytest.raises(DataError, match="5 labels for the 4 images"):
        read_imagenet(tmp_path)

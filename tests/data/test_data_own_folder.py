"""A user's image folder: hidden and system entries are skipped and reported, a small folder
still gets a validation split that can rank, and the split is described in words."""

import numpy as np
import pytest
from PIL import Image

from gspdml.data import build_data
from gspdml.data.base import EvalSplit
from gspdml.data.images import list_images
from gspdml.data.splits import validation_classes
from gspdml.data.summary import describe_splits, ranking_problem


def _png(path, value=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(path)


def test_hidden_and_system_entries_are_skipped_and_listed(tmp_path):
    for name in ("a", "b", "c", "d"):
        for i in range(3):
            _png(tmp_path / name / f"{i}.png", 40 * i)
    for hidden in (".ipynb_checkpoints/x.png", "__MACOSX/a/y.png", "a/.cache/z.png", "a/._0.png"):
        _png(tmp_path / hidden)
    _png(tmp_path / "loose.png")
    images, skipped = list_images(tmp_path / "a")
    assert [p.name for p in images] == ["0.png", "1.png", "2.png"]
    assert sorted(p.name for p in skipped) == ["._0.png", ".cache"]

    data = build_data(
        {
            "name": "image_folder",
            "root": str(tmp_path),
            "test_fraction": 0.5,
            "resize": 8,
            "crop": 8,
        },
        seed=0,
    )
    assert sorted(
        data.train.class_names + data.val.query.class_names + data.test.query.class_names
    ) == ["a", "b", "c", "d"]
    (note,) = [n for n in data.notes if "hidden" in n]
    for entry in (".ipynb_checkpoints", "__MACOSX", ".cache", "._0.png", "loose.png"):
        assert entry in note
    assert describe_splits(data)[:3] == [
        "train: 1 classes, 3 images",
        "val: 1 classes, 3 images (leave-one-out)",
        "test: 2 classes, 6 images (leave-one-out)",
    ]


@pytest.mark.parametrize(
    "classes, minimum, expected", [(5, 2, 2), (5, 1, 1), (4, 2, 2), (3, 2, 1), (40, 2, 10)]
)
def test_validation_classes_at_least_the_minimum_while_classes_remain(classes, minimum, expected):
    fit, val = validation_classes(np.arange(classes), 0.25, minimum=minimum)
    assert (
        len(val) == expected
        and len(fit) == classes - expected
        and set(val) == set(range(classes - expected, classes))
    )


def test_ranking_problem_counts_classes_with_a_relevant_item():
    class Labels:
        def __init__(self, labels):
            self.labels = np.asarray(labels)

    assert ranking_problem(EvalSplit(Labels([0, 0, 1, 1]))) is None
    assert "1 class(es)" in ranking_problem(
        EvalSplit(Labels([0, 0, 1, 2]))
    )  # only class 0 can rank
    assert ranking_problem(EvalSplit(Labels([0, 0, 0])))
    assert ranking_problem(EvalSplit(Labels([0, 1]), Labels([0, 1]))) is None  # query -> gallery

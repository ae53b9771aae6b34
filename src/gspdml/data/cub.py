"""CUB-200-2011 in its official layout (``CUB_200_2011.tgz``)::

    <root>/[CUB_200_2011/]images.txt              "<image_id> <relative path>"
    <root>/[CUB_200_2011/]image_class_labels.txt  "<image_id> <class_id 1..200>"
    <root>/[CUB_200_2011/]classes.txt             "<class_id> <name>" (optional)
    <root>/[CUB_200_2011/]images/<path>

Zero-shot split (Gürbüz thesis §5.3.4.1): the first 100 classes (5,864 images) train,
the last 100 (5,924) test. ``train_test_split.txt`` is the *classification* split and is never read.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from gspdml.data.image_splits import (
    OfficialSplits,
    Records,
    register_image_dataset,
    split_first_half,
)
from gspdml.data.textfiles import find_dir, read_columns
from gspdml.errors import DataError

SOURCE = "CUB-200-2011"
EXPECTED = dict(
    images=11788, train_images=5864, test_images=5924, train_classes=100, test_classes=100
)


# a line of images.txt, image_class_labels.txt and classes.txt
class _Image(NamedTuple):
    id: int
    path: str


class _Label(NamedTuple):
    id: int
    label: int


class _Class(NamedTuple):
    id: int
    name: str


@register_image_dataset("cub200", "cub")
def read_cub(root: str) -> OfficialSplits:
    """CUB-200-2011, zero-shot 100/100 class split (see :mod:`gspdml.data.cub`).

    Args:
        root: the dataset's folder (the official layout; e.g. ``data/CUB_200_2011``).
    """
    base = find_dir(root, "images.txt", [".", "CUB_200_2011"], SOURCE)
    images = read_columns(base / "images.txt", _Image, SOURCE)
    labels = dict(read_columns(base / "image_class_labels.txt", _Label, SOURCE))
    missing = [r.id for r in images if r.id not in labels]
    if missing:
        raise DataError(
            f"{base / 'image_class_labels.txt'}: no class for image ids {missing[:5]} ({len(missing)} in all)"
        )
    classes = base / "classes.txt"
    names = dict(read_columns(classes, _Class, SOURCE)) if classes.is_file() else {}
    records = Records(
        [str(base / "images" / r.path) for r in images],
        np.array([labels[r.id] for r in images]),
        names,
    )
    return split_first_half(records).checked(SOURCE, EXPECTED)

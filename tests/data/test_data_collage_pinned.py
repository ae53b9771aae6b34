"""The collage datasets are a fixed benchmark: for a given seed and options every registered
collage yields the same images, labels and class names as when these digests were recorded
(sha256 of the raw arrays of each split, first 16 hex digits)."""

import hashlib

import numpy as np
import pytest

from gspdml.data import build_data
from tests.data.test_data_fashion import write_idx

PINNED = [
    ({"name": "collage_digits", "images_per_class": 3}, "86cb7f64a1be4927"),
    (
        {
            "name": "collage_digits",
            "images_per_class": 2,
            "grid": 3,
            "background_tiles": 4,
            "tile_size": 12,
        },
        "1c57b6e66f217efa",
    ),
    (
        {
            "name": "collage_fashion",
            "images_per_class": 2,
            "class_split": [10, 5, 5],
            "glyph_split": [0.5, 0.25, 0.25],
        },
        "49e426edba4de48d",
    ),
    ({"name": "collage_shared", "images_per_class": 2}, "14aa9a7bb940a45d"),
    (
        {"name": "collage_shared", "images_per_class": 2, "source": "fashion", "tile_size": 28},
        "fd2f441dd8ec39e6",
    ),
]


@pytest.fixture(scope="module")
def fashion_root(tmp_path_factory):
    """Synthetic Fashion-MNIST files, drawn as in tests/data/test_data_fashion.py."""
    root = tmp_path_factory.mktemp("fashion")
    rng = np.random.default_rng(0)
    for part, per_class in (("train", 12), ("t10k", 3)):
        labels = np.repeat(np.arange(10), per_class)
        images = rng.integers(1, 256, (len(labels), 28, 28))
        images[:, 0] = labels[:, None]
        write_idx(root / f"{part}-images-idx3-ubyte.gz", images)
        write_idx(root / f"{part}-labels-idx1-ubyte.gz", labels)
    return root


def digest(data) -> str:
    h = hashlib.sha256()
    for part in (
        data.train,
        data.val.query if data.val else None,
        data.test.query if data.test else None,
    ):
        if part is not None:
            h.update(np.asarray(part.images).tobytes())
            h.update(np.asarray(part.labels).tobytes())
            h.update(repr(list(part.class_names)).encode())
    return h.hexdigest()[:16]


@pytest.mark.parametrize(
    "spec, expected", PINNED, ids=[f"{s['name']}-{i}" for i, (s, _) in enumerate(PINNED)]
)
def test_collages_are_pinned(spec, expected, fashion_root):
    if spec.get("name") == "collage_fashion" or spec.get("source") == "fashion":
        spec = {**spec, "root": str(fashion_root)}
    assert digest(build_data({**spec, "cache": False}, seed=5)) == expected

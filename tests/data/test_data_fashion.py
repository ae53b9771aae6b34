import gzip
import struct

import numpy as np
import pytest
import torch

from gspdml.data import build_data
from gspdml.data.fashion_mnist import read_idx
from gspdml.data.glyphs import SPLITS
from gspdml.errors import DataError


def write_idx(path, array):
    """The IDX format written independently: magic 0,0,0x08,ndim, big-endian sizes, bytes."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}i", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def fashion_root(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    for part, per_class in (("train", 12), ("t10k", 3)):
        labels = np.repeat(np.arange(10), per_class)
        images = rng.integers(1, 256, (len(labels), 28, 28))
        images[:, 0] = labels[:, None]  # the first row tells the class
        write_idx(tmp_path / f"{part}-images-idx3-ubyte.gz", images)
        write_idx(tmp_path / f"{part}-labels-idx1-ubyte.gz", labels)
    return tmp_path


def test_idx_round_trip_and_errors(tmp_path):
    a = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(np.uint8)
    write_idx(tmp_path / "a.gz", a)
    assert np.array_equal(read_idx(tmp_path / "a.gz"), a)
    (tmp_path / "b").write_bytes(bytes([0, 0, 0x08, 1]) + struct.pack(">i", 5) + b"abc")
    with pytest.raises(DataError, match=r"b: 11 bytes, expected 13"):
        read_idx(tmp_path / "b")
    with pytest.raises(DataError, match="missing .*train-images-idx3-ubyte"):
        build_data({"name": "fashion_mnist", "root": str(tmp_path)}, seed=0)


def test_fashion_mnist_class_disjoint(fashion_root):
    data = build_data(
        {"name": "fashion_mnist", "root": str(fashion_root), "class_split": [6, 2, 2]}, seed=0
    )
    assert data.channels == 1 and data.num_classes == 6
    assert len(data.train) == 6 * 15 and len(data.val.query) == 30 and len(data.test.query) == 30
    assert data.test.query.class_names == ["Bag", "Ankle boot"]
    for dataset, first_class in ((data.train, 0), (data.val.query, 6), (data.test.query, 8)):
        raw = dataset.images[:, 0, 0, 0].numpy()  # first-row marker = original class
        assert np.array_equal(raw, dataset.labels + first_class)
    x = torch.stack([data.train[i][0] for i in range(len(data.train))])
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-3
    few = build_data(
        {"name": "fashion_mnist", "root": str(fashion_root), "images_per_class": 5}, seed=0
    )
    assert np.bincount(few.train.labels).tolist() == [5] * 6


def test_collage_fashion_splits(fashion_root):
    data = build_data(
        {
            "name": "collage_fashion",
            "root": str(fashion_root),
            "images_per_class": 2,
            "class_split": [10, 5, 5],
            "glyph_split": [1, 1, 1],
        },
        seed=0,
    )
    assert data.train[0][0].shape == (1, 56, 56) and data.num_classes == 10
    names = [set(d.class_names) for d in (data.train, data.val.query, data.test.query)]
    assert not (names[0] & names[1] or names[0] & names[2] or names[1] & names[2])
    assert len(SPLITS) == 3 and all("|" in n for n in names[0])


def test_a_collage_of_replaced_glyph_files_is_built_again_not_read_from_the_cache(fashion_root):
    """The collage cache was keyed by the glyph folder: files replaced there (another
    Fashion-MNIST of the same size) gave the collages of the old ones. It is keyed by the files'
    content hashes."""
    spec = {
        "name": "collage_fashion",
        "root": str(fashion_root),
        "images_per_class": 2,
        "class_split": [10, 5, 5],
        "glyph_split": [1, 1, 1],
    }
    before = build_data(spec, seed=0).train.images.clone()
    assert torch.equal(build_data(spec, seed=0).train.images, before)  # the cache
    path = fashion_root / "train-images-idx3-ubyte.gz"
    images = read_idx(path).copy()
    images[:, 1:] = 255 - images[:, 1:]  # other glyphs, the same shape and markers
    write_idx(path, images)
    after = build_data(spec, seed=0).train.images
    assert not torch.equal(after, before)
    assert len(list((fashion_root / "cache").glob("collage_fashion-*.npz"))) == 2

"""The CIFAR readers on generated files in the official python layout (tests/helpers/cifar_files.py)."""

import os
import pickle

import numpy as np
import pytest

from gspdml.data import build_data
from gspdml.data.arrays import counted_pixel_statistics, pixel_statistics
from gspdml.data.cifar import load_cifar, read_pickle
from gspdml.errors import ConfigError, DataError
from tests.helpers.cifar_files import fine_to_coarse, write_cifar10, write_cifar100


@pytest.fixture(scope="module")
def cifar10_root(tmp_path_factory):
    return write_cifar10(tmp_path_factory.mktemp("c10"))


@pytest.fixture(scope="module")
def cifar100_root(tmp_path_factory):
    return write_cifar100(tmp_path_factory.mktemp("c100"))


def test_cifar10_images_are_channel_major_rows_in_file_order(cifar10_root):
    data = load_cifar("cifar10", str(cifar10_root))
    folder = cifar10_root / "cifar-10-batches-py"
    with open(folder / "data_batch_1", "rb") as f:
        first = pickle.load(f, encoding="bytes")
    row = first[b"data"][4]
    for c, y, x in [(0, 0, 1), (1, 5, 7), (2, 31, 31), (2, 0, 0)]:
        assert data.train[4, c, y, x] == row[c * 1024 + y * 32 + x]
    assert data.train.shape == (150, 3, 32, 32) and data.test.shape == (20, 3, 32, 32)
    assert data.train_labels[: len(first[b"labels"])].tolist() == first[b"labels"]
    # the helper writes each image's label into its first value: batches are joined in order
    assert (data.train[:, 0, 0, 0] == data.train_labels).all()
    assert (data.test[:, 0, 0, 0] == data.test_labels).all()
    assert data.names == [f"class{c}" for c in range(10)] and data.coarse_names is None


def test_cifar100_reads_fine_and_coarse_labels(cifar100_root):
    data = load_cifar("cifar100", str(cifar100_root / "cifar-100-python"))
    assert data.train.shape == (300, 3, 32, 32) and len(data.test) == 100
    assert (data.train_coarse == fine_to_coarse()[data.train_labels]).all()
    assert (data.test_coarse == fine_to_coarse()[data.test_labels]).all()
    assert data.coarse_names[9] == "large_man-made_outdoor_things" and data.names[3] == "fine03"


def test_registered_datasets_keep_the_official_split(cifar10_root, cifar100_root):
    ten = build_data({"name": "cifar10", "root": str(cifar10_root), "images_per_class": 2}, seed=0)
    assert len(ten.train) == 20 and ten.channels == 3 and ten.num_classes == 10
    assert sorted(np.unique(ten.test.query.labels)) == list(range(10))
    image, label = ten.train[0]
    assert image.shape == (3, 32, 32)
    held = build_data(
        {"name": "cifar10", "root": str(cifar10_root), "val_images_per_class": 4}, seed=0
    )
    train_rows = {img[0, 0, 0].item() for img in held.train.images}
    assert len(held.train) == 110 and len(held.val.query) == 40 and len(held.test.query) == 20
    val_images = held.val.query.images.numpy()
    full = load_cifar("cifar10", str(cifar10_root))
    for c in range(10):  # the last 4 training images of each class, in file order
        np.testing.assert_array_equal(
            val_images[held.val.query.labels == c], full.train[full.train_labels == c][-4:]
        )
    assert train_rows == set(range(10))
    with pytest.raises(ConfigError, match="val_images_per_class"):
        build_data({"name": "cifar10", "root": str(cifar10_root), "val_images_per_class": 15}, 0)
    hundred = build_data({"name": "cifar100", "root": str(cifar100_root)}, seed=0)
    assert len(hundred.train) == 300 and hundred.num_classes == 100


def test_counted_statistics_equal_the_float_ones():
    images = np.random.default_rng(3).integers(0, 256, (7, 3, 5, 4), dtype=np.uint8)
    assert counted_pixel_statistics(images) == pytest.approx(pixel_statistics(images), rel=1e-12)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused_and_named(tmp_path, cifar10_root):
    marker = tmp_path / "ran"
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name in os.listdir(cifar10_root / "cifar-10-batches-py"):
        (folder / name).write_bytes((cifar10_root / "cifar-10-batches-py" / name).read_bytes())
    with open(folder / "data_batch_3", "wb") as f:
        pickle.dump({b"data": _RunsCode(marker), b"labels": []}, f, protocol=2)
    with pytest.raises(DataError, match=r"data_batch_3: refused to load.*(posix|os)\.system"):
        load_cifar("cifar10", str(tmp_path))
    assert not marker.exists()


def test_non_data_objects_and_broken_files_are_refused(tmp_path):
    from collections import OrderedDict

    path = tmp_path / "odd"
    path.write_bytes(pickle.dumps(OrderedDict(a=1), protocol=2))
    with pytest.raises(DataError, match="odd: refused to load.*collections.OrderedDict"):
        read_pickle(path)
    path.write_bytes(pickle.dumps({b"data": np.zeros(3, dtype=np.float32)}, protocol=2))
    with pytest.raises(DataError, match="odd: expected a dict"):
        read_pickle(path)
    path.write_bytes(pickle.dumps({b"data": 1}, protocol=2)[:-5])
    with pytest.raises(DataError, match="odd: not a readable CIFAR pickle"):
        read_pickle(path)


def test_missing_root_or_files_are_named(tmp_path, cifar10_root):
    with pytest.raises(ConfigError, match="data.dataset.root.*cifar-10-batches-py"):
        build_data({"name": "cifar10"}, seed=0)
    with pytest.raises(DataError, match="no cifar-100-python/meta"):
        load_cifar("cifar100", str(tmp_path))
    broken = tmp_path / "b"
    (broken / "cifar-10-batches-py").mkdir(parents=True)
    for name in ("batches.meta", "data_batch_1"):
        src = cifar10_root / "cifar-10-batches-py" / name
        (broken / "cifar-10-batches-py" / name).write_bytes(src.read_bytes())
    with pytest.raises(DataError, match="data_batch_2: cannot read"):
        load_cifar("cifar10", str(broken))

"""The Cifar Collage built from generated CIFAR-100 files by the rules of the GSP paper's
supplement §2.2 (every generated image carries its fine label in its first red value, so each
tile's class is read back from the pixels, independently of the builder's bookkeeping)."""

import numpy as np
import pytest

from gspdml.data import build_data
from gspdml.data.cifar import load_cifar
from gspdml.data.cifar_collage import SHARED_SUPERCLASSES, cifar_tiles
from gspdml.data.glyphs import SPLITS
from gspdml.data.shared_collage import compose_collages
from gspdml.errors import ConfigError
from tests.helpers.cifar_files import COARSE_NAMES, fine_to_coarse, write_cifar100

SHARED = [COARSE_NAMES.index(n) for n in SHARED_SUPERCLASSES]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return write_cifar100(tmp_path_factory.mktemp("c100"), per_class=3, test_per_class=1)


@pytest.fixture(scope="module")
def arrays(root):
    data = load_cifar("cifar100", str(root))
    source = cifar_tiles(
        np.concatenate([data.train, data.test]),
        np.concatenate([data.train_labels, data.test_labels]),
        np.concatenate([data.train_coarse, data.test_coarse]),
    )
    return compose_collages(
        source, split_seed=1, grid=2, images_per_class=2, shared=SHARED, sub_split=(2, 1, 2)
    )


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


def tile_fine_labels(images):
    """The fine class of each 32×32 tile of 2×2 collages, read from the pixels ``[N, 4]``."""
    return np.stack([images[:, 0, 32 * r, 32 * c] for r in range(2) for c in range(2)], 1)


def test_class_counts_and_shared_super_classes_follow_the_paper(arrays):
    coarse = fine_to_coarse()
    for split, targets, backgrounds in zip(SPLITS, (32, 16, 32), (8, 4, 8)):
        pairs, shared = arrays[f"{split}_pairs"], arrays[f"{split}_background_set"]
        assert (len(pairs), len(shared)) == (targets, backgrounds)
        assert (coarse[pairs[:, 1]] == pairs[:, 0]).all() and (
            coarse[shared[:, 1]] == shared[:, 0]
        ).all()
        assert sorted(set(shared[:, 0])) == sorted(SHARED)
        assert not set(pairs[:, 0]) & set(SHARED)
        per_super = np.bincount(pairs[:, 0], minlength=20)[
            [c for c in range(20) if c not in SHARED]
        ]
        assert (per_super == {"train": 2, "val": 1, "test": 2}[split]).all()
    fine = [
        set(arrays[f"{s}_pairs"][:, 1]) | set(arrays[f"{s}_background_set"][:, 1]) for s in SPLITS
    ]
    assert not (fine[0] & fine[1] or fine[0] & fine[2] or fine[1] & fine[2])


def test_each_collage_is_one_target_image_and_three_background_images_of_its_split(arrays, root):
    data = load_cifar("cifar100", str(root))
    pool = np.concatenate([data.train, data.test])
    for split in SPLITS:
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        assert images.shape == (len(labels), 3, 64, 64) and images.dtype == np.uint8
        fine = tile_fine_labels(images)
        target = arrays[f"{split}_pairs"][labels, 1]
        position = arrays[f"{split}_position"]
        assert (fine[np.arange(len(labels)), position] == target).all()
        others = np.delete(fine, position + 4 * np.arange(len(labels))).reshape(-1, 3)
        assert set(others.ravel()) <= set(arrays[f"{split}_background_set"][:, 1])
        for i in range(len(labels)):  # every tile is an unmodified CIFAR image
            for t in range(4):
                r, c = divmod(t, 2)
                tile = images[i, :, 32 * r : 32 * r + 32, 32 * c : 32 * c + 32]
                np.testing.assert_array_equal(tile, pool[arrays[f"{split}_glyphs"][i, t, 0]])
    assert len(np.unique(arrays["train_position"])) == 4


def test_registered_collage_builds_from_the_files_and_names_its_classes(root):
    data = build_data({"name": "collage_cifar", "root": str(root), "images_per_class": 2}, seed=0)
    assert (len(data.train), len(data.val.query), len(data.test.query)) == (64, 32, 64)
    assert data.channels == 3 and data.train[0][0].shape == (3, 64, 64)
    assert all("/fine" in name for name in data.train.class_names)
    again = build_data({"name": "collage_cifar", "root": str(root), "images_per_class": 2}, seed=7)
    np.testing.assert_array_equal(data.test.query.images.numpy(), again.test.query.images.numpy())
    distilled = build_data(
        {"name": "collage_cifar", "root": str(root), "images_per_class": 2, "grid": 1}, seed=0
    )
    assert distilled.train[0][0].shape == (3, 32, 32)
    with pytest.raises(ConfigError, match="data.dataset.shared.*'clouds'"):
        build_data({"name": "collage_cifar", "root": str(root), "shared": ["clouds"]}, seed=0)

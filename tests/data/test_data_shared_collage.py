"""The faithful Cifar-Collage analogue (GSP paper, supplement §2.2): disjoint target and
background classes and source images across splits; targets and backgrounds are tiles of the
same kind, made from the same source by the same preprocessing."""

import numpy as np
import pytest
from sklearn.datasets import load_digits

from gspdml.data import build_data
from gspdml.data.glyphs import SPLITS, resize_glyphs
from gspdml.data.shared_collage import (
    build_shared_collage_arrays,
    partition,
    tile_classification_arrays,
)
from gspdml.errors import ConfigError

SETTING = dict(
    split_seed=3,
    tile_size=16,
    grid=2,
    images_per_class=3,
    shared_super=2,
    sub_split=(4, 2, 4),
    glyph_split=(0.6, 0.2, 0.2),
)

#: the ordered digit pairs as classes: super-class a, sub-classes b = 0..9
DIGIT_PAIRS = {a: range(10) for a in range(10)}


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def digits():
    d = load_digits()
    return (d.images * 255.0 / 16.0).round().astype(np.uint8), d.target.astype(np.int64)


@pytest.fixture(scope="module")
def arrays(digits):
    return build_shared_collage_arrays(*digits, **SETTING)


def pairs(array):
    return {tuple(int(v) for v in p) for p in array.reshape(-1, 2)}


def test_class_counts_follow_the_paper(arrays):
    # 8 target super-classes x (4, 2, 4) and 2 shared super-classes x (4, 2, 4): the paper's 32/16/32 and 8/4/8
    assert [len(arrays[f"{s}_pairs"]) for s in SPLITS] == [32, 16, 32]
    assert [len(arrays[f"{s}_background_set"]) for s in SPLITS] == [8, 4, 8]


def test_targets_backgrounds_and_source_images_are_disjoint_across_splits(arrays):
    targets = [pairs(arrays[f"{s}_pairs"]) for s in SPLITS]
    backgrounds = [pairs(arrays[f"{s}_background_set"]) for s in SPLITS]
    glyphs = [set(arrays[f"{s}_glyphs"].ravel().tolist()) for s in SPLITS]
    for i in range(3):
        for j in range(i + 1, 3):
            assert (
                not targets[i] & targets[j]
                and not backgrounds[i] & backgrounds[j]
                and not glyphs[i] & glyphs[j]
            )
    assert not set.union(*targets) & set.union(*backgrounds)
    # background classes are the sub-classes of the shared super-classes only
    shared = {a for a, _ in set.union(*backgrounds)}
    assert len(shared) == 2 and not shared & {a for a, _ in set.union(*targets)}


def test_each_collage_holds_its_target_once_and_backgrounds_of_its_split_elsewhere(arrays):
    for s in SPLITS:
        tiles, position, labels = (
            arrays[f"{s}_tile_pairs"],
            arrays[f"{s}_position"],
            arrays[f"{s}_labels"],
        )
        n = len(labels)
        assert n == 3 * len(arrays[f"{s}_pairs"])
        np.testing.assert_array_equal(tiles[np.arange(n), position], arrays[f"{s}_pairs"][labels])
        others = np.ones(tiles.shape[:2], bool)
        others[np.arange(n), position] = False
        assert pairs(tiles[others]) <= pairs(arrays[f"{s}_background_set"])


def test_target_and_background_tiles_come_from_the_same_source_and_preprocessing(arrays, digits):
    images, labels = digits
    cells = resize_glyphs(
        images, 8
    )  # 8x8 digits at 8 px: unchanged, so the tiles are raw digit pixels
    np.testing.assert_array_equal(cells, images)
    for s in SPLITS:
        collages, used, tiles = (
            arrays[f"{s}_images"],
            arrays[f"{s}_glyphs"],
            arrays[f"{s}_tile_pairs"],
        )
        # every tile, target or background, shows its class's two digits upright in rows 4..11
        np.testing.assert_array_equal(labels[used], tiles)
        for i in range(len(collages)):
            for t in range(4):
                r, c = divmod(t, 2)
                tile = collages[i, 16 * r : 16 * r + 16, 16 * c : 16 * c + 16]
                assert not tile[:4].any() and not tile[12:].any()
                np.testing.assert_array_equal(tile[4:12, :8], images[used[i, t, 0]])
                np.testing.assert_array_equal(tile[4:12, 8:], images[used[i, t, 1]])


def test_pretraining_tiles_cover_every_class_from_training_images_only(arrays, digits):
    tiles = tile_classification_arrays(
        *digits, split_seed=3, tile_size=16, tiles_per_class=2, glyph_split=(0.6, 0.2, 0.2), seed=0
    )
    assert sorted(set(tiles["labels"].tolist())) == list(range(100))
    held_out = set(arrays["val_glyphs"].ravel().tolist()) | set(
        arrays["test_glyphs"].ravel().tolist()
    )
    assert not set(tiles["glyphs"].ravel().tolist()) & held_out
    np.testing.assert_array_equal(
        digits[1][tiles["glyphs"]], np.stack([tiles["labels"] // 10, tiles["labels"] % 10], 1)
    )


def test_the_split_depends_on_split_seed_only_and_bad_splits_are_named():
    a = partition(DIGIT_PAIRS, split_seed=0, shared=2, sub_split=(4, 2, 4))
    b = partition(DIGIT_PAIRS, split_seed=1, shared=2, sub_split=(4, 2, 4))
    assert any(not np.array_equal(a[k], b[k]) for k in a)
    with pytest.raises(ConfigError, match="sub_split"):
        partition(DIGIT_PAIRS, split_seed=0, shared=2, sub_split=(6, 2, 4))
    with pytest.raises(ConfigError, match="shared_super"):
        partition(DIGIT_PAIRS, split_seed=0, shared=10, sub_split=(4, 2, 4))


def test_registered_dataset_is_the_same_for_every_run_seed_and_records_target_positions():
    first = build_data({"name": "collage_shared", "images_per_class": 2}, seed=0)
    second = build_data({"name": "collage_shared", "images_per_class": 2}, seed=5)
    assert (len(first.train), len(first.val.query), len(first.test.query)) == (64, 32, 64)
    assert first.train[0][0].shape == (1, 32, 32)
    np.testing.assert_array_equal(first.test.query.images.numpy(), second.test.query.images.numpy())
    assert first.test.query.tile_positions.shape == (64,)
    with pytest.raises(ConfigError, match="source"):
        build_data({"name": "collage_shared", "source": "cifar"}, seed=0)

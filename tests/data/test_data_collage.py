import numpy as np
import pytest
import torch
from sklearn.datasets import load_digits

from gspdml.data import build_data
from gspdml.data import collage as collage_module
from gspdml.data.cache import cache_dir
from gspdml.data.collage import build_collage_arrays
from gspdml.data.glyphs import SPLITS, digit_glyphs
from gspdml.errors import ConfigError

SMALL = dict(
    tile_size=16,
    grid=2,
    background_tiles=None,
    images_per_class=3,
    class_split=(60, 20, 20),
    background_split=(4, 3, 3),
    glyph_split=(0.6, 0.2, 0.2),
)


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path / "cache"))


@pytest.fixture(scope="module")
def arrays():
    glyphs, labels = digit_glyphs()
    return build_collage_arrays(glyphs, labels, seed=7, **SMALL)


@pytest.fixture(scope="module")
def raw_digits():
    """The digits straight from scikit-learn, scaled independently of the library."""
    d = load_digits()
    return (d.images * 255.0 / 16.0).round().astype(np.uint8), d.target


def test_target_background_and_glyph_disjointness(arrays, raw_digits):
    _, digit_labels = raw_digits
    pair_sets = [{tuple(p) for p in arrays[f"{s}_pairs"]} for s in SPLITS]
    assert [len(p) for p in pair_sets] == [60, 20, 20]
    assert (
        not (pair_sets[0] & pair_sets[1])
        and not (pair_sets[0] & pair_sets[2])
        and not (pair_sets[1] & pair_sets[2])
    )
    backgrounds = [set(arrays[f"{s}_background_set"].tolist()) for s in SPLITS]
    assert [len(b) for b in backgrounds] == [4, 3, 3]
    assert set.union(*backgrounds) == set(range(10))
    glyph_sets = [set(arrays[f"{s}_glyphs"].ravel().tolist()) for s in SPLITS]
    assert (
        not (glyph_sets[0] & glyph_sets[1])
        and not (glyph_sets[0] & glyph_sets[2])
        and not (glyph_sets[1] & glyph_sets[2])
    )
    for s, used in zip(SPLITS, backgrounds):
        assert set(arrays[f"{s}_background_classes"].ravel().tolist()) <= used
        # the glyphs of each background tile are images of its background digit
        g = arrays[f"{s}_glyphs"][:, 2:].reshape(len(arrays[f"{s}_labels"]), -1, 4)
        assert (digit_labels[g] == arrays[f"{s}_background_classes"][:, :, None]).all()


def _tiles(image, grid, size):
    return [
        image[r * size : (r + 1) * size, c * size : (c + 1) * size]
        for r in range(grid)
        for c in range(grid)
    ]


def test_each_image_has_exactly_one_target_tile(arrays, raw_digits):
    images, digit_labels = raw_digits
    upright = {d: {g.tobytes() for g in images[digit_labels == d]} for d in range(10)}
    rotated_any = {np.rot90(g).tobytes() for g in images}
    for s in SPLITS:
        for image, label, position in zip(
            arrays[f"{s}_images"], arrays[f"{s}_labels"], arrays[f"{s}_position"]
        ):
            a, b = arrays[f"{s}_pairs"][label]
            found = []
            for t, tile in enumerate(_tiles(image, 2, 16)):
                band_blank = not tile[:4].any() and not tile[12:].any()
                if (
                    band_blank
                    and tile[4:12, :8].tobytes() in upright[a]
                    and tile[4:12, 8:].tobytes() in upright[b]
                ):
                    found.append(t)
                else:  # every other tile is a texture of four rotated digits
                    cells = [tile[:8, :8], tile[:8, 8:], tile[8:, :8], tile[8:, 8:]]
                    assert all(c.tobytes() in rotated_any for c in cells)
            assert found == [position]


def test_factory_images_match_arrays_and_are_normalised(arrays):
    data = build_data({"name": "collage_digits", **SMALL}, seed=7)
    assert data.channels == 1 and data.num_classes == 60
    train = data.train
    assert np.array_equal(train.labels, arrays["train_labels"])
    x = torch.stack([train[i][0] for i in range(len(train))])
    assert x.shape == (180, 1, 32, 32)
    assert abs(float(x.mean())) < 1e-4 and abs(float(x.std()) - 1) < 1e-3
    raw = (x * train.std + train.mean) * 255
    assert torch.allclose(raw[:, 0], torch.from_numpy(arrays["train_images"]).float(), atol=1e-3)
    assert len(data.val.query) == 60 and data.val.gallery is None and len(data.test.query) == 60
    # keys may carry the epoch, as the sampler yields them with with_epoch=True
    assert torch.equal(train[(5, 3)][0], train[5][0]) and train[(5, 3)][1] == train[5][1]


def test_deterministic_and_cached(monkeypatch):
    first = build_data({"name": "collage_digits", **SMALL}, seed=3)
    files = list(cache_dir().glob("collage_digits-*.npz"))
    assert len(files) == 1 and not list(cache_dir().glob("*.tmp"))

    def no_rebuild(*args, **kwargs):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(collage_module, "build_collage_arrays", no_rebuild)
    again = build_data({"name": "collage_digits", **SMALL}, seed=3)
    assert torch.equal(first.test.query.images, again.test.query.images)
    monkeypatch.undo()
    fresh = build_data({"name": "collage_digits", "cache": False, **SMALL}, seed=3)
    assert torch.equal(first.train.images, fresh.train.images)
    other = build_data({"name": "collage_digits", "cache": False, **SMALL}, seed=4)
    assert not torch.equal(first.train.images, other.train.images)


def test_distilled_and_partial_backgrounds():
    glyphs, labels = digit_glyphs()
    alone = build_collage_arrays(
        glyphs, labels, seed=0, **{**SMALL, "grid": 1, "background_tiles": 0}
    )
    assert alone["train_images"].shape == (180, 16, 16)
    assert not alone["train_images"][:, :4].any()  # only the target tile, with its blank band
    one = build_collage_arrays(
        glyphs, labels, seed=0, **{**SMALL, "background_tiles": 1, "tile_size": 24}
    )
    blank = [sum(not t.any() for t in _tiles(im, 2, 24)) for im in one["train_images"]]
    assert one["train_images"].shape[1:] == (48, 48) and set(blank) == {2}


@pytest.mark.parametrize(
    "option, value",
    [
        ("background_tiles", 4),
        ("class_split", (90, 20, 0)),
        ("background_split", (6, 3, 3)),
        ("tile_size", 15),
    ],
)
def test_bad_options_name_the_field(option, value):
    with pytest.raises(ConfigError, match=f"data.dataset.{option}"):
        build_data({"name": "collage_digits", "cache": False, **SMALL, option: value}, seed=0)


def test_augmentation_is_seeded_and_keeps_tiles():
    data = build_data({"name": "collage_digits", "augment": True, "max_shift": 0, **SMALL}, seed=1)
    plain = data.train.dataset
    for i in (0, 17, 101):
        x = data.train[(i, 5)][0]
        assert torch.equal(x, data.train[(i, 5)][0])
        tiles = sorted(t.numpy().tobytes() for t in _tiles(x[0], 2, 16))
        assert tiles == sorted(t.numpy().tobytes() for t in _tiles(plain[i][0][0], 2, 16))
    differs = [not torch.equal(data.train[(i, 0)][0], data.train[(i, 1)][0]) for i in range(20)]
    assert sum(differs) >= 10  # 23 of 24 permutations move something


def _precision_at_1(features, labels):
    f = features - features.mean(0)
    f /= np.linalg.norm(f, axis=1, keepdims=True) + 1e-12
    sim = f @ f.T
    np.fill_diagonal(sim, -np.inf)
    return float((labels[sim.argmax(1)] == labels).mean())


def test_averaging_over_tiles_mixes_in_the_background():
    """Why the collage needs feature selection: the target tile alone retrieves its class far
    better than the average over all tiles (what GAP does to pixel features)."""
    arrays = build_collage_arrays(*digit_glyphs(), seed=0, **{**SMALL, "images_per_class": 10})
    images, labels, position = (
        arrays["test_images"].astype(float),
        arrays["test_labels"],
        arrays["test_position"],
    )
    tiles = images.reshape(-1, 2, 16, 2, 16).transpose(0, 1, 3, 2, 4).reshape(len(images), 4, 256)
    target = _precision_at_1(tiles[np.arange(len(images)), position], labels)
    average = _precision_at_1(tiles.mean(1), labels)
    assert target > 0.8 and average < target - 0.4


def test_the_embedded_digits_take_no_root():
    with pytest.raises(ConfigError, match="data.dataset.root"):
        build_data({"name": "collage_digits", "root": "/tmp", "cache": False, **SMALL}, seed=0)

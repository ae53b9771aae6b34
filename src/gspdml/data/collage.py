"""Collage datasets in the manner of the GSP paper's *Cifar Collage* (GSP paper supplement §2.2;
Gürbüz thesis §5.3.2; :mod:`gspdml.data.cifar_collage`), zero-shot in the foreground and in the
background: global average pooling mixes the background into the embedding, while GSP can
select the target tile.

Here the tiles are built from small glyph images with 10 base classes (scikit-learn's digits,
Fashion-MNIST), which are too few classes for a zero-shot split, so richer classes are composed:

* **target tile** = two upright glyphs side by side (class = ordered pair ``(a, b)`` of base
  classes; up to ``K²`` classes split into train/val/test by a seeded permutation);
* **background tile** = a 2×2 texture of four glyphs of one base class rotated by 90°
  (background classes = base classes split across train/val/test, e.g. 4/3/3);
* **collage** = ``grid × grid`` tiles; the target tile sits at a uniformly random position and
  ``background_tiles`` of the other positions hold background tiles (the rest stay blank;
  ``background_tiles = 0`` with ``grid = 1`` is the "distilled" baseline: the target tile alone).

Each split draws its glyph images from its own disjoint pool, so no glyph image is shared
between splits either. :mod:`gspdml.data.shared_collage` is the variant faithful to the paper.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Optional, TypeVar

import numpy as np

from gspdml.data.arrays import ArrayDataset, pixel_statistics
from gspdml.data.base import DATASETS, DataSplits
from gspdml.data.cache import cached_arrays
from gspdml.data.glyphs import (
    FIELD,
    SPLITS,
    class_names,
    draw_glyphs,
    glyph_pools,
    pair_tile,
    resize_glyphs,
    source_content,
    source_glyphs,
    source_location,
    tile_slot,
)
from gspdml.data.seeded import SeededTransformDataset
from gspdml.data.splits import carve_fold, validation_classes
from gspdml.data.transforms import Compose, RandomShift, TilePermutation
from gspdml.errors import ConfigError
from gspdml.registry import documented_by, supplied_by_caller

FORMAT_VERSION = 1
_Count = TypeVar("_Count", int, float)


def _check_split(values: Sequence[_Count], total: float, option: str) -> tuple[_Count, ...]:
    values = tuple(values)
    if len(values) != 3 or any(v < 0 for v in values):
        raise ConfigError(
            f"{FIELD}.{option}",
            f"expected three non-negative numbers (train, val, test), got {values!r}",
        )
    if sum(values) > total:
        raise ConfigError(
            f"{FIELD}.{option}", f"{values!r} asks for {sum(values)} but only {total} are available"
        )
    return values


def build_collage_arrays(
    glyphs: np.ndarray,
    glyph_labels: np.ndarray,
    *,
    seed: int,
    tile_size: int,
    grid: int,
    background_tiles: Optional[int],
    images_per_class: int,
    class_split: Sequence[int],
    background_split: Sequence[int],
    glyph_split: Sequence[float],
) -> dict[str, np.ndarray]:
    """Compose the three splits. Returns, for each split ``s``:

    * ``s_images`` uint8 ``[N, grid·tile, grid·tile]``, ``s_labels`` int64 ``[N]`` (0..C_s-1);
    * ``s_pairs`` ``[C_s, 2]``: the base classes ``(a, b)`` of each target class;
    * ``s_position`` ``[N]``: the target tile's position (row-major);
    * ``s_background_positions`` / ``s_background_classes`` ``[N, B]``;
    * ``s_glyphs`` ``[N, 2 + 4B]``: the glyph indices used (target left, right, then each
      background tile's cells in row-major order);
    * ``s_background_set``: the split's background base classes.
    """
    if tile_size < 2 or tile_size % 2:
        raise ConfigError(f"{FIELD}.tile_size", f"must be an even number >= 2, got {tile_size}")
    if grid < 1:
        raise ConfigError(f"{FIELD}.grid", f"must be >= 1, got {grid}")
    if background_tiles is None:
        background_tiles = grid * grid - 1
    if not 0 <= background_tiles <= grid * grid - 1:
        raise ConfigError(
            f"{FIELD}.background_tiles",
            f"must be in [0, {grid * grid - 1}] for a {grid}x{grid} grid, got {background_tiles}",
        )
    if images_per_class < 1:
        raise ConfigError(f"{FIELD}.images_per_class", f"must be >= 1, got {images_per_class}")
    base = np.unique(glyph_labels).astype(int)
    pairs = np.array([(a, b) for a in base for b in base], dtype=np.int64)
    class_split = _check_split(class_split, len(pairs), "class_split")
    background_split = _check_split(background_split, len(base), "background_split")
    glyph_split = _check_split(glyph_split, float("inf"), "glyph_split")
    if class_split[0] < 1:
        raise ConfigError(f"{FIELD}.class_split", "the training split needs at least one class")
    if background_tiles and any(n == 0 for n, c in zip(background_split, class_split) if c):
        raise ConfigError(
            f"{FIELD}.background_split",
            f"every used split needs a background class, got {background_split!r}",
        )

    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xC0FFEE]))
    pair_order = pairs[rng.permutation(len(pairs))]
    background_order = rng.permutation(base)
    pools = glyph_pools(np.asarray(glyph_labels), glyph_split, rng)
    cell = tile_size // 2
    upright = resize_glyphs(glyphs, cell)
    rotated = np.ascontiguousarray(np.rot90(upright, k=1, axes=(1, 2)))
    side = grid * tile_size

    out: dict[str, np.ndarray] = {}
    c0 = b0 = 0
    for s, split in enumerate(SPLITS):
        split_pairs = pair_order[c0 : c0 + class_split[s]]
        split_backgrounds = np.sort(background_order[b0 : b0 + background_split[s]])
        c0, b0 = c0 + class_split[s], b0 + background_split[s]
        n = len(split_pairs) * images_per_class
        images = np.zeros((n, side, side), dtype=np.uint8)
        labels = np.repeat(np.arange(len(split_pairs)), images_per_class)
        position = rng.integers(0, grid * grid, size=n)
        bg_positions = np.zeros((n, background_tiles), dtype=np.int64)
        bg_classes = np.zeros((n, background_tiles), dtype=np.int64)
        used = np.zeros((n, 2 + 4 * background_tiles), dtype=np.int64)
        for i in range(n):
            a, b = split_pairs[labels[i]]
            if a == b:
                left, right = draw_glyphs(pools[s][a], 2, rng, f"class {a} in {split}")
            else:
                (left,), (right,) = (
                    draw_glyphs(pools[s][a], 1, rng, f"class {a} in {split}"),
                    draw_glyphs(pools[s][b], 1, rng, f"class {b} in {split}"),
                )
            used[i, :2] = left, right
            images[i][tile_slot(position[i], grid, tile_size)] = pair_tile(
                upright[left], upright[right], tile_size
            )
            free = np.setdiff1d(np.arange(grid * grid), [position[i]])
            bg_positions[i] = np.sort(rng.choice(free, size=background_tiles, replace=False))
            bg_classes[i] = rng.choice(split_backgrounds, size=background_tiles)
            for t in range(background_tiles):
                cells = draw_glyphs(
                    pools[s][int(bg_classes[i, t])],
                    4,
                    rng,
                    f"background class {bg_classes[i, t]} in {split}",
                )
                used[i, 2 + 4 * t : 6 + 4 * t] = cells
                images[i][tile_slot(bg_positions[i, t], grid, tile_size)] = np.block(
                    [[rotated[cells[0]], rotated[cells[1]]], [rotated[cells[2]], rotated[cells[3]]]]
                )
        out.update(
            {
                f"{split}_images": images,
                f"{split}_labels": labels,
                f"{split}_pairs": split_pairs,
                f"{split}_position": position,
                f"{split}_background_positions": bg_positions,
                f"{split}_background_classes": bg_classes,
                f"{split}_glyphs": used,
                f"{split}_background_set": split_backgrounds,
            }
        )
    return out


def collage_splits(
    build: Callable[[], dict[str, np.ndarray]],
    key: dict[str, Any],
    pair_name: Callable[[int, int], str],
    *,
    cache: bool,
    seed: int,
    grid: int,
    augment: bool,
    max_shift: int,
    shuffle_tiles: bool,
    dataset: str,
    cache_name: Optional[str] = None,
    val_fold: Optional[int] = None,
    num_folds: int = 4,
    val_classes: Optional[Sequence[int]] = None,
) -> DataSplits:
    """The arrays ``build`` returns (as those of :func:`build_collage_arrays`), cached under
    ``cache_name`` (default ``dataset``) and ``key`` unless ``cache`` is false
    (:func:`gspdml.data.cache.cached_arrays`), as datasets normalised with the training split's
    pixel statistics, class ``(a, b)`` named ``pair_name(a, b)``; ``val_fold`` or
    ``val_classes`` need ``class_split[1] = 0`` (:func:`gspdml.data.splits.carve_fold`).

    Args:
        grid: tiles per side of a collage (``grid x grid``).
        augment: augment training collages: seeded tile shuffling and shifts, per ``(seed, epoch,
            index)``.
        max_shift: the largest shift of an augmented training image, in pixels.
        shuffle_tiles: with ``augment``, also permute the tiles of a training collage.
    """
    arrays = cached_arrays(cache_name or dataset, key, build, enabled=cache)
    mean, std = pixel_statistics(arrays["train_images"])

    def part(split: str) -> ArrayDataset:
        names = [pair_name(int(a), int(b)) for a, b in arrays[f"{split}_pairs"]]
        images = ArrayDataset(
            arrays[f"{split}_images"], arrays[f"{split}_labels"], mean, std, names
        )
        images.tile_positions, images.tile_grid = arrays[f"{split}_position"], grid
        return images

    val_part, test_part = (part(s) if len(arrays[f"{s}_labels"]) else None for s in SPLITS[1:])
    splits = carve_fold(
        part("train"),
        val_part,
        test_part,
        dataset=dataset,
        val_fold=val_fold,
        num_folds=num_folds,
        val_classes=val_classes,
    )
    if augment:
        steps = ([TilePermutation(grid)] if shuffle_tiles and grid > 1 else []) + (
            [RandomShift(max_shift)] if max_shift else []
        )
        splits.train = SeededTransformDataset(splits.train, Compose(steps), seed=seed)
    return splits


def glyph_pair_name(source: str) -> Callable[[int, int], str]:
    """The name of the glyph pair class ``(a, b)``: ``"<name of a>|<name of b>"``."""
    names = class_names(source)
    return lambda a, b: f"{names[a]}|{names[b]}"


def glyph_collage(source: str, tile_size: int) -> Callable[..., DataSplits]:
    """The dataset factory of this module's collage over ``source`` glyphs
    (:mod:`gspdml.data.glyphs`), with tiles of ``tile_size`` pixels by default; registered below
    as ``collage_digits`` and ``collage_fashion``."""

    def collage(
        seed: int = 0,
        root: Optional[str] = None,
        tile_size: int = tile_size,
        grid: int = 2,
        background_tiles: Optional[int] = None,
        images_per_class: int = 40,
        class_split: Sequence[int] = (60, 20, 20),
        background_split: Sequence[int] = (4, 3, 3),
        glyph_split: Sequence[float] = (0.6, 0.2, 0.2),
        augment: bool = False,
        max_shift: int = 2,
        shuffle_tiles: bool = True,
        cache: bool = True,
        val_fold: Optional[int] = None,
        num_folds: int = 4,
        val_classes: Optional[Sequence[int]] = None,
    ) -> DataSplits:
        """Zero-shot collage of glyph pairs over rotated-glyph backgrounds (train/val/test classes,
        background classes and glyph images all disjoint; the module docstring).

        Args:
            root: the folder of the glyph files (Fashion-MNIST only; the digits are embedded).
            tile_size: side of a tile in pixels (even).
            background_tiles: background tiles per collage (null: ``grid² - 1``; 0: the target tile
                alone).
            images_per_class: collages per target class.
            class_split: target classes (glyph pairs) of train / validation / test.
            background_split: background (base) classes of train / validation / test.
            glyph_split: shares of the glyph images drawn by train / validation / test.
            cache: cache the generated arrays under ``$GSPDML_CACHE`` (default ``~/.cache/gspdml``).
        """
        if root is not None and source_location(source) is None:
            raise ConfigError(
                f"{FIELD}.root", f"the {source} glyphs are embedded; they take no root"
            )
        params: dict[str, Any] = dict(
            seed=int(seed),
            tile_size=int(tile_size),
            grid=int(grid),
            background_tiles=background_tiles,
            images_per_class=int(images_per_class),
            class_split=list(class_split),
            background_split=list(background_split),
            glyph_split=[float(f) for f in glyph_split],
        )
        key = {"version": FORMAT_VERSION, "files": source_content(source, root), **params}
        return collage_splits(
            lambda: build_collage_arrays(*source_glyphs(source, root), **params),
            key,
            glyph_pair_name(source),
            cache=cache,
            seed=seed,
            grid=grid,
            augment=augment,
            max_shift=max_shift,
            shuffle_tiles=shuffle_tiles,
            dataset=f"collage_{source}",
            val_fold=val_fold,
            num_folds=num_folds,
            val_classes=val_classes,
        )

    collage.__name__ = collage.__qualname__ = f"collage_{source}"
    return supplied_by_caller("seed")(documented_by(collage_splits, validation_classes)(collage))


#: the embedded default dataset: 16×16 tiles (two 8×8 digits side by side for the target, four
#: 8×8 digits rotated by 90° for a background), a 2×2 grid, i.e. 32×32 single-channel images
collage_digits = DATASETS.register("collage_digits")(glyph_collage("digits", tile_size=16))
#: Fashion-MNIST items as glyphs: 28×28 tiles, each item downscaled to 14×14 (56×56 images)
collage_fashion = DATASETS.register("collage_fashion")(glyph_collage("fashion", tile_size=28))

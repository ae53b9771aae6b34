"""The collage faithful to the GSP paper's *Cifar Collage* (GSP paper, supplement §2.2 and Fig. 9).

The paper takes CIFAR-100's 20 super-classes of 5 sub-classes each, splits every super-class's
sub-classes 2 / 1 / 2 between train, validation and test, declares 4 super-classes *shared*
(background) and composes, for each sub-class of the other 16, a 2×2 collage of one image of
that sub-class and 3 images of shared sub-classes of the same split. Background tiles are
ordinary images of ordinary classes, in the same format as the targets, and the backbone
(ResNet20) is pre-trained on CIFAR-100 classification, which covers the background classes too:
it cannot zero out the background, so pooling must select the target tile.

Here the images are built from 10 base glyph classes (scikit-learn's digits or Fashion-MNIST):

* a **tile** shows two glyphs side by side, upright, in the middle band; its (fine) class is the
  ordered pair ``(a, b)``; its **super-class** is ``a``, so there are 10 super-classes of 10
  sub-classes. Target and background tiles are drawn by one function (:func:`pair_tile`): same
  source, same resizing, no transformation of one kind only (no rotation, unlike the older
  collages of :mod:`gspdml.data.collage`);
* ``shared_super`` super-classes are the background; the sub-classes of every super-class are
  split ``sub_split`` (default 4 / 2 / 4, the paper's 2 / 1 / 2 doubled), giving 32 / 16 / 32
  target classes and 8 / 4 / 8 background classes with the default 2 shared super-classes, the
  paper's counts;
* the glyph images are split between train, validation and test too (``glyph_split``), so no
  source image appears in two splits; the pre-training tiles of
  :func:`tile_classification_arrays` come from the training glyph pool only.

The construction depends on ``split_seed`` only (a fixed benchmark); the run seed varies training.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

import numpy as np

from gspdml.data.base import DATASETS, DataSplits
from gspdml.data.cache import cached_arrays
from gspdml.data.collage import collage_splits
from gspdml.data.glyphs import (
    FIELD,
    SPLITS,
    check_source,
    class_names,
    draw_glyphs,
    glyph_pools,
    resize_glyphs,
    source_glyphs,
)
from gspdml.errors import ConfigError
from gspdml.registry import supplied_by_caller

#: the glyph pools of a split seed come from their own stream, so that the collage and the
#: pre-training tiles (:func:`tile_classification_arrays`) split the source images identically
POOL_STREAM = 0x9001


def split_pools(
    glyph_labels: np.ndarray, glyph_split: Sequence[float], split_seed: int
) -> list[dict[int, np.ndarray]]:
    """Per split, per base class: the glyph images that split may use (disjoint across splits)."""
    return glyph_pools(
        np.asarray(glyph_labels),
        glyph_split,
        np.random.default_rng(np.random.SeedSequence([split_seed, POOL_STREAM])),
    )


def pair_tile(left: np.ndarray, right: np.ndarray, tile_size: int) -> np.ndarray:
    """A ``tile_size²`` tile with two ``tile_size/2`` glyphs side by side in its middle band."""
    cell = tile_size // 2
    tile = np.zeros((tile_size, tile_size), dtype=np.uint8)
    top = cell // 2
    tile[top : top + cell, :cell] = left
    tile[top : top + cell, cell:] = right
    return tile


def partition(
    base: Iterable[int], *, split_seed: int, shared_super: int, sub_split: Sequence[int]
) -> dict[str, np.ndarray]:
    """Seeded split of the ordered pairs of ``base`` classes. Returns, per split ``s``,
    ``s_targets`` and ``s_backgrounds``: arrays ``[C, 2]`` of pairs ``(super, sub)``."""
    base = np.asarray(sorted(int(b) for b in base))
    sub_split = tuple(int(v) for v in sub_split)
    if len(sub_split) != 3 or min(sub_split) < 0 or sum(sub_split) > len(base) or sub_split[0] < 1:
        raise ConfigError(
            f"{FIELD}.sub_split",
            f"expected (train, val, test) sub-class counts, train >= 1, summing to <= {len(base)}, got {sub_split}",
        )
    if not 1 <= shared_super < len(base):
        raise ConfigError(
            f"{FIELD}.shared_super", f"must be in [1, {len(base) - 1}], got {shared_super}"
        )
    rng = np.random.default_rng(np.random.SeedSequence([split_seed, 0x5AED]))
    supers = rng.permutation(base)
    bounds = np.cumsum([0, *sub_split])
    out: dict[str, list] = {
        f"{s}_{kind}": [] for s in SPLITS for kind in ("targets", "backgrounds")
    }
    for rank, a in enumerate(supers):
        kind = "backgrounds" if rank < shared_super else "targets"
        subs = rng.permutation(base)
        for s, split in enumerate(SPLITS):
            out[f"{split}_{kind}"] += [
                (int(a), int(b)) for b in sorted(subs[bounds[s] : bounds[s + 1]])
            ]
    return {
        key: np.asarray(sorted(pairs), dtype=np.int64).reshape(-1, 2) for key, pairs in out.items()
    }


def build_shared_collage_arrays(
    glyphs: np.ndarray,
    glyph_labels: np.ndarray,
    *,
    split_seed: int,
    tile_size: int,
    grid: int,
    images_per_class: int,
    shared_super: int,
    sub_split: Sequence[int],
    glyph_split: Sequence[float],
) -> dict[str, np.ndarray]:
    """Compose the three splits. Per split ``s``: ``s_images`` uint8 ``[N, grid·tile, grid·tile]``;
    ``s_labels`` ``[N]`` (0..C_s-1, indexing ``s_pairs``); ``s_pairs`` ``[C_s, 2]`` (the target
    classes); ``s_background_set`` ``[B_s, 2]`` (the background classes); ``s_position`` ``[N]``
    (the target tile, row-major); ``s_tile_pairs`` ``[N, grid², 2]`` (each tile's class);
    ``s_glyphs`` ``[N, grid², 2]`` (the glyph images each tile shows)."""
    if tile_size < 2 or tile_size % 2:
        raise ConfigError(f"{FIELD}.tile_size", f"must be an even number >= 2, got {tile_size}")
    if grid < 1:
        raise ConfigError(
            f"{FIELD}.grid",
            f'must be >= 1 (1: the target tile alone, the paper\'s "distilled" baseline), got {grid}',
        )
    if images_per_class < 1:
        raise ConfigError(f"{FIELD}.images_per_class", f"must be >= 1, got {images_per_class}")
    classes = partition(
        np.unique(glyph_labels),
        split_seed=split_seed,
        shared_super=shared_super,
        sub_split=sub_split,
    )
    rng = np.random.default_rng(np.random.SeedSequence([split_seed, 0xC011]))
    pools = split_pools(glyph_labels, glyph_split, split_seed)
    cells = resize_glyphs(glyphs, tile_size // 2)
    tiles = grid * grid
    out: dict[str, np.ndarray] = {}
    for s, split in enumerate(SPLITS):
        targets, backgrounds = classes[f"{split}_targets"], classes[f"{split}_backgrounds"]
        n = len(targets) * images_per_class
        labels = np.repeat(np.arange(len(targets)), images_per_class)
        position = rng.integers(0, tiles, size=n)
        if n and tiles > 1 and not len(backgrounds):
            raise ConfigError(
                f"{FIELD}.sub_split",
                f"the {split} split has target classes but no background class",
            )
        tile_pairs = np.zeros((n, tiles, 2), dtype=np.int64)
        if tiles > 1 and n:
            tile_pairs[:] = backgrounds[rng.integers(0, len(backgrounds), size=(n, tiles))]
        tile_pairs[np.arange(n), position] = targets[labels]
        used = np.zeros((n, tiles, 2), dtype=np.int64)
        images = np.zeros((n, grid * tile_size, grid * tile_size), dtype=np.uint8)
        for i in range(n):
            for t in range(tiles):
                a, b = tile_pairs[i, t]
                used[i, t] = [
                    draw_glyphs(pools[s][int(c)], 1, rng, f"class {c} in {split}")[0]
                    for c in (a, b)
                ]
                r, c = divmod(t, grid)
                images[
                    i, r * tile_size : (r + 1) * tile_size, c * tile_size : (c + 1) * tile_size
                ] = pair_tile(cells[used[i, t, 0]], cells[used[i, t, 1]], tile_size)
        out.update(
            {
                f"{split}_images": images,
                f"{split}_labels": labels,
                f"{split}_pairs": targets,
                f"{split}_background_set": backgrounds,
                f"{split}_position": position,
                f"{split}_tile_pairs": tile_pairs,
                f"{split}_glyphs": used,
            }
        )
    return out


def tile_classification_arrays(
    glyphs: np.ndarray,
    glyph_labels: np.ndarray,
    *,
    split_seed: int,
    tile_size: int,
    tiles_per_class: int,
    glyph_split: Sequence[float],
    seed: int,
    pool: str = "train",
) -> dict[str, np.ndarray]:
    """Single tiles of *every* ordered pair class (targets and backgrounds of all splits, as
    CIFAR-100 classification covers all of Cifar Collage's classes) for pre-training a backbone,
    drawn from one glyph pool of the collage with the same ``split_seed`` and ``glyph_split``
    (``pool="train"``: no validation or test image of the collage is ever shown). Returns
    ``images`` uint8 ``[K²·tiles_per_class, tile, tile]``, ``labels`` (pair ``a·K + b``) and
    ``glyphs`` ``[N, 2]``; ``seed`` draws the glyphs."""
    if pool not in SPLITS:
        raise ConfigError("pretrain.data.pool", f"{pool!r} is not one of {', '.join(SPLITS)}")
    pools = split_pools(glyph_labels, glyph_split, split_seed)[SPLITS.index(pool)]
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x711E]))
    base = np.unique(glyph_labels).astype(int)
    cells = resize_glyphs(glyphs, tile_size // 2)
    pairs = [(a, b) for a in base for b in base]
    n = len(pairs) * tiles_per_class
    images = np.zeros((n, tile_size, tile_size), dtype=np.uint8)
    labels = np.repeat(np.arange(len(pairs)), tiles_per_class)
    used = np.zeros((n, 2), dtype=np.int64)
    for i in range(n):
        a, b = pairs[labels[i]]
        used[i] = [
            draw_glyphs(pools[int(c)], 1, rng, f"class {c} in the {pool} pool")[0] for c in (a, b)
        ]
        images[i] = pair_tile(cells[used[i, 0]], cells[used[i, 1]], tile_size)
    return {"images": images, "labels": labels, "glyphs": used}


FORMAT_VERSION = 1


@DATASETS.register("collage_shared")
@supplied_by_caller("seed")
def collage_shared(
    seed: int = 0,
    source: str = "digits",
    root: Optional[str] = None,
    split_seed: int = 0,
    tile_size: int = 16,
    grid: int = 2,
    images_per_class: int = 40,
    shared_super: int = 2,
    sub_split: Sequence[int] = (4, 2, 4),
    glyph_split: Sequence[float] = (0.6, 0.2, 0.2),
    augment: bool = False,
    max_shift: int = 2,
    shuffle_tiles: bool = True,
    cache: bool = True,
) -> DataSplits:
    """The Cifar-Collage analogue of this module's docstring over ``source`` glyphs
    (:mod:`gspdml.data.glyphs`; default: a 2×2 grid of 16-px tiles, 32×32 images; ``grid: 1``
    keeps the target tile alone). ``augment`` shuffles the tiles and shifts training
    images by up to ``max_shift`` pixels, seeded by the run ``seed``; the arrays are cached by
    content hash (:func:`gspdml.data.cache.cached_arrays`)."""
    params: dict[str, Any] = dict(
        split_seed=int(split_seed),
        tile_size=int(tile_size),
        grid=int(grid),
        images_per_class=int(images_per_class),
        shared_super=int(shared_super),
        sub_split=[int(v) for v in sub_split],
        glyph_split=[float(f) for f in glyph_split],
    )
    check_source(source)
    key = {"version": FORMAT_VERSION, "source": source, "root": root, **params}
    arrays = cached_arrays(
        f"collage_shared_{source}",
        key,
        lambda: build_shared_collage_arrays(*source_glyphs(source, root), **params),
        enabled=cache,
    )
    return collage_splits(
        arrays,
        class_names(source),
        seed=seed,
        grid=grid,
        augment=augment,
        max_shift=max_shift,
        shuffle_tiles=shuffle_tiles,
        dataset="collage_shared",
    )

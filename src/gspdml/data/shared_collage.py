"""The collage faithful to the GSP paper's *Cifar Collage* (GSP paper, supplement §2.2 and Fig. 9;
the construction is described in :mod:`gspdml.data.cifar_collage`). Background tiles are ordinary
images of ordinary classes, and the backbone is pre-trained on classification covering the
background classes too: it cannot zero out the background, so pooling must select the target tile.

Here the images are built from 10 base glyph classes (scikit-learn's digits or Fashion-MNIST):

* a **tile** shows two glyphs side by side, upright, in the middle band; its (fine) class is the
  ordered pair ``(a, b)``; its **super-class** is ``a``, so there are 10 super-classes of 10
  sub-classes. Target and background tiles are drawn by one function (:func:`~gspdml.data.glyphs.pair_tile`): same
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
One builder (:func:`compose_collages`) composes the collages of any :class:`TileSource`: the glyph
pairs here (:func:`glyph_tiles`) and CIFAR-100's images for the Cifar Collage itself
(:mod:`gspdml.data.cifar_collage`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from gspdml.data.base import DATASETS, DataSplits
from gspdml.data.collage import collage_splits, glyph_pair_name
from gspdml.data.glyphs import (
    FIELD,
    SPLITS,
    check_source,
    draw_glyphs,
    glyph_pools,
    pair_tile,
    resize_glyphs,
    source_content,
    source_glyphs,
    tile_slot,
)
from gspdml.errors import ConfigError
from gspdml.registry import documented_by, supplied_by_caller

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


def partition(
    subclasses: Mapping[int, Iterable[int]],
    *,
    split_seed: int,
    shared: Union[int, Collection[int]],
    sub_split: Sequence[int],
) -> dict[str, np.ndarray]:
    """Seeded split of the classes ``(super, sub)`` of ``subclasses`` (super-class -> its
    sub-classes): the sub-classes of every super-class are split ``sub_split`` between train,
    validation and test; ``shared`` super-classes (a count drawn at random, or the super-class
    ids) are the background. Returns, per split ``s``, ``s_targets`` and ``s_backgrounds``: arrays
    ``[C, 2]`` of pairs ``(super, sub)``."""
    subs_of = {int(a): np.asarray(sorted(int(b) for b in subs)) for a, subs in subclasses.items()}
    supers = np.asarray(sorted(subs_of))
    fewest = min(len(subs) for subs in subs_of.values())
    sub_split = tuple(int(v) for v in sub_split)
    if len(sub_split) != 3 or min(sub_split) < 0 or sum(sub_split) > fewest or sub_split[0] < 1:
        raise ConfigError(
            f"{FIELD}.sub_split",
            f"expected (train, val, test) sub-class counts, train >= 1, summing to <= {fewest}, got {sub_split}",
        )
    if isinstance(shared, (int, np.integer)):
        if not 1 <= shared < len(supers):
            raise ConfigError(
                f"{FIELD}.shared_super", f"must be in [1, {len(supers) - 1}], got {shared}"
            )
    elif not shared or not set(shared) < set(supers.tolist()):
        raise ConfigError(
            f"{FIELD}.shared",
            f"expected some but not all of the super-classes {supers.tolist()}, got {sorted(shared)}",
        )
    rng = np.random.default_rng(np.random.SeedSequence([split_seed, 0x5AED]))
    order = rng.permutation(supers)
    bounds = np.cumsum([0, *sub_split])
    out: dict[str, list[tuple[int, int]]] = {
        f"{s}_{kind}": [] for s in SPLITS for kind in ("targets", "backgrounds")
    }
    for rank, a in enumerate(order):
        background = rank < shared if isinstance(shared, (int, np.integer)) else a in shared
        kind = "backgrounds" if background else "targets"
        subs = rng.permutation(subs_of[int(a)])
        for s, split in enumerate(SPLITS):
            out[f"{split}_{kind}"] += [
                (int(a), int(b)) for b in sorted(subs[bounds[s] : bounds[s + 1]])
            ]
    return {
        key: np.asarray(sorted(pairs), dtype=np.int64).reshape(-1, 2) for key, pairs in out.items()
    }


@dataclass(frozen=True)
class TileSource:
    """What a collage is made of: classes ``(super, sub)`` and a way to draw a tile of one.

    ``subclasses``: super-class -> its sub-classes; ``tile_shape``: ``(T, T)`` or ``(C, T, T)``;
    ``draw(split_index, super, sub, rng)``: a tile of that class from the images of that split,
    and the indices of the source images it shows (``images_per_tile`` of them)."""

    subclasses: Mapping[int, Sequence[int]]
    tile_shape: tuple[int, ...]
    images_per_tile: int
    draw: Callable[[int, int, int, np.random.Generator], tuple[np.ndarray, list[int]]]


def glyph_tiles(
    glyphs: np.ndarray,
    glyph_labels: np.ndarray,
    *,
    split_seed: int,
    tile_size: int,
    glyph_split: Sequence[float],
) -> TileSource:
    """Pair tiles of glyphs (module docstring): class ``(a, b)``, super-class ``a``; each split
    draws from its own glyph pool (:func:`split_pools`)."""
    if tile_size < 2 or tile_size % 2:
        raise ConfigError(f"{FIELD}.tile_size", f"must be an even number >= 2, got {tile_size}")
    pools = split_pools(glyph_labels, glyph_split, split_seed)
    cells = resize_glyphs(glyphs, tile_size // 2)
    base = [int(b) for b in np.unique(glyph_labels)]

    def draw(s: int, a: int, b: int, rng: np.random.Generator) -> tuple[np.ndarray, list[int]]:
        used = [
            int(draw_glyphs(pools[s][c], 1, rng, f"class {c} in {SPLITS[s]}")[0]) for c in (a, b)
        ]
        return pair_tile(cells[used[0]], cells[used[1]], tile_size), used

    return TileSource(dict.fromkeys(base, base), (tile_size, tile_size), 2, draw)


def compose_collages(
    source: TileSource,
    *,
    split_seed: int,
    grid: int,
    images_per_class: int,
    shared: Union[int, Collection[int]],
    sub_split: Sequence[int],
) -> dict[str, np.ndarray]:
    """Compose the three splits: every collage has one tile of a target class of its split at a
    uniformly random position and tiles of uniformly drawn background classes of the same split
    elsewhere. Per split ``s``: ``s_images`` uint8 ``[N, (C,) grid·T, grid·T]``; ``s_labels``
    ``[N]`` (0..C_s-1, indexing ``s_pairs``); ``s_pairs`` ``[C_s, 2]`` (the target classes);
    ``s_background_set`` ``[B_s, 2]`` (the background classes); ``s_position`` ``[N]`` (the
    target tile, row-major); ``s_tile_pairs`` ``[N, grid², 2]`` (each tile's class);
    ``s_glyphs`` ``[N, grid², images_per_tile]`` (the source images each tile shows)."""
    if grid < 1:
        raise ConfigError(
            f"{FIELD}.grid",
            f'must be >= 1 (1: the target tile alone, the paper\'s "distilled" baseline), got {grid}',
        )
    if images_per_class < 1:
        raise ConfigError(f"{FIELD}.images_per_class", f"must be >= 1, got {images_per_class}")
    classes = partition(
        source.subclasses, split_seed=split_seed, shared=shared, sub_split=sub_split
    )
    rng = np.random.default_rng(np.random.SeedSequence([split_seed, 0xC011]))
    *channels, side, _ = source.tile_shape
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
        used = np.zeros((n, tiles, source.images_per_tile), dtype=np.int64)
        images = np.zeros((n, *channels, grid * side, grid * side), dtype=np.uint8)
        for i in range(n):
            for t in range(tiles):
                a, b = tile_pairs[i, t]
                tile, used[i, t] = source.draw(s, int(a), int(b), rng)
                images[i][(..., *tile_slot(t, grid, side))] = tile
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
    """:func:`compose_collages` of glyph pair tiles (:func:`glyph_tiles`)."""
    source = glyph_tiles(
        glyphs, glyph_labels, split_seed=split_seed, tile_size=tile_size, glyph_split=glyph_split
    )
    return compose_collages(
        source,
        split_seed=split_seed,
        grid=grid,
        images_per_class=images_per_class,
        shared=shared_super,
        sub_split=sub_split,
    )


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
@documented_by(collage_splits)
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
    (:mod:`gspdml.data.glyphs`; default: a 2×2 grid of 16-px tiles, 32×32 images).

    Args:
        source: the glyphs: ``digits`` (embedded) or ``fashion``.
        root: the folder of the glyph files (Fashion-MNIST only).
        split_seed: seeds the construction (the run's seed varies training only).
        tile_size: side of a tile in pixels.
        images_per_class: collages per target class.
        shared_super: super-classes shared as the background.
        sub_split: sub-classes of each super-class for train / validation / test.
        glyph_split: shares of the glyph images drawn by train / validation / test.
        cache: cache the generated arrays by content hash.
    """
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
    files = source_content(source, root)  # the key: the glyph files' content, not their folder
    key = {"version": FORMAT_VERSION, "source": source, "files": files, **params}
    return collage_splits(
        lambda: build_shared_collage_arrays(*source_glyphs(source, root), **params),
        key,
        glyph_pair_name(source),
        cache=cache,
        seed=seed,
        grid=grid,
        augment=augment,
        max_shift=max_shift,
        shuffle_tiles=shuffle_tiles,
        dataset="collage_shared",
        cache_name=f"collage_shared_{source}",
    )

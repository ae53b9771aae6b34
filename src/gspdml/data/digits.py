"""``collage_digits``: the embedded default dataset, a collage of scikit-learn's digits.

scikit-learn ships ``load_digits`` (1,797 images of 8×8 pixels with values 0..16, 10 digits), so
this dataset needs no download. See :mod:`gspdml.data.collage` for the construction (after the
GSP paper's Cifar Collage, seed 000 supplement §2.2). Defaults: 16×16 tiles (two 8×8 digits side
by side for the target; four 8×8 digits rotated by 90° for a background), a 2×2 grid, i.e.
32×32 single-channel images; 100 ordered digit pairs split 60/20/20 into train/val/test target
classes; the 10 digits split 4/3/3 into background classes; glyph images split 60/20/20.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from gspdml.data.base import DATASETS, DataSplits
from gspdml.data.cache import cached_arrays
from gspdml.data.collage import build_collage_arrays, collage_splits

FORMAT_VERSION = 1


def digit_glyphs() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as uint8 ``[1797, 8, 8]`` (values 0..16 scaled to 0..255) and labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    glyphs = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    return glyphs, digits.target.astype(np.int64)


@DATASETS.register("collage_digits")
def collage_digits(
    seed: int = 0,
    tile_size: int = 16,
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
    """Zero-shot collage of digit pairs over rotated-digit backgrounds (train/val/test classes,
    background classes and glyph images all disjoint).

    ``background_tiles`` defaults to ``grid² - 1``; 0 leaves only the target tile (with
    ``grid: 1`` that is the "distilled" baseline). ``augment`` applies, to training items only,
    a seeded random tile permutation (``shuffle_tiles``) and a shift of up to ``max_shift``
    pixels, reproducible per ``(seed, epoch, index)``. Generated arrays are cached under
    ``$GSPDML_CACHE`` (default ``~/.cache/gspdml``) unless ``cache`` is false. ``val_fold`` (of
    ``num_folds``) or ``val_classes`` carve the validation classes off the training classes, for
    the protocol folds (:func:`gspdml.data.splits.carve_fold`; needs ``class_split[1] = 0``).
    """
    params = dict(
        seed=int(seed), tile_size=int(tile_size), grid=int(grid), background_tiles=background_tiles,
        images_per_class=int(images_per_class), class_split=list(class_split),
        background_split=list(background_split), glyph_split=[float(f) for f in glyph_split],
    )

    def build() -> dict[str, np.ndarray]:
        glyphs, labels = digit_glyphs()
        return build_collage_arrays(glyphs, labels, **params)

    arrays = cached_arrays("collage_digits", {"version": FORMAT_VERSION, **params}, build, enabled=cache)
    return collage_splits(arrays, [str(d) for d in range(10)], seed=seed, grid=grid, augment=augment,
                          max_shift=max_shift, shuffle_tiles=shuffle_tiles, dataset="collage_digits",
                          val_fold=val_fold, num_folds=num_folds, val_classes=val_classes)


collage_digits.supplied_by_caller = ("seed",)

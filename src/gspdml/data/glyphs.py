"""The glyph images the collages are built from, and how the splits share them out.

A *glyph source* has 10 base classes of small single-channel images: ``digits`` (scikit-learn's
8×8 digits: no download, :func:`digit_glyphs`) or ``fashion`` (Fashion-MNIST's 28×28 items, see
:mod:`gspdml.data.fashion_mnist`). Every collage resizes its glyphs with
:func:`resize_glyphs`, gives each split its own disjoint pool of glyph images
(:func:`glyph_pools`, so no source image appears in two splits) and draws from a pool with
:func:`draw_glyphs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError

SPLITS = ("train", "val", "test")
FIELD = "data.dataset"
SOURCES = ("digits", "fashion")


def check_source(source: str) -> None:
    if source not in SOURCES:
        raise ConfigError(f"{FIELD}.source", f"{source!r} is not one of {', '.join(SOURCES)}")


def digit_glyphs() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits as uint8 ``[1797, 8, 8]`` (values 0..16 scaled to 0..255) and labels."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    glyphs = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)
    return glyphs, digits.target.astype(np.int64)


def source_glyphs(source: str, root: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """The glyph images (uint8 ``[N, h, w]``) and labels of ``source`` (``fashion``: read from
    ``root`` or the Debian package's folder)."""
    check_source(source)
    if source == "digits":
        return digit_glyphs()
    from gspdml.data.fashion_mnist import load_fashion_mnist

    return load_fashion_mnist(root)


def source_content(source: str, root: Optional[str] = None) -> list[str]:
    """The content hashes of the files the glyphs of ``source`` are read from (none when they
    are embedded): what a cache of arrays built from them is keyed by, never their folder."""
    location = source_location(source, root)
    if location is None:
        return []
    from gspdml.data.fashion_mnist import idx_files
    from gspdml.file_digest import file_sha256

    return [file_sha256(path) for path in idx_files(Path(location), "Fashion-MNIST")]


def source_location(source: str, root: Optional[str] = None) -> Optional[str]:
    """Where the glyphs of ``source`` are read from (an absolute folder), None when embedded."""
    check_source(source)
    if source == "digits":
        return None
    from gspdml.data.fashion_mnist import DEFAULT_ROOT

    return str(Path(root or DEFAULT_ROOT).expanduser().resolve())


def class_names(source: str) -> list[str]:
    """Names of the 10 base classes of ``source``."""
    check_source(source)
    from gspdml.data.fashion_mnist import CLASS_NAMES

    return list(CLASS_NAMES) if source == "fashion" else [str(d) for d in range(10)]


def resize_glyphs(glyphs: np.ndarray, size: int) -> np.ndarray:
    """Resize uint8 ``[N, h, w]`` glyphs to ``[N, size, size]`` (bilinear, antialiased)."""
    if glyphs.shape[1:] == (size, size):
        return glyphs
    x = torch.from_numpy(glyphs.astype(np.float32))[:, None]
    x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return x[:, 0].round().clamp(0, 255).to(torch.uint8).numpy()


def glyph_pools(
    glyph_labels: np.ndarray, fractions: Sequence[float], rng: np.random.Generator
) -> list[dict[int, np.ndarray]]:
    """Per split, per base class: the indices of the glyph images that split may use (disjoint):
    each class's images, permuted by ``rng``, are cut at the cumulative ``fractions``."""
    total = float(sum(fractions))
    bounds = np.cumsum([0.0, *fractions]) / total
    pools: list[dict[int, np.ndarray]] = [{} for _ in SPLITS]
    for c in np.unique(glyph_labels):
        members = rng.permutation(np.flatnonzero(glyph_labels == c))
        cuts = np.round(bounds * len(members)).astype(int)
        for s in range(len(SPLITS)):
            pools[s][int(c)] = np.sort(members[cuts[s] : cuts[s + 1]])
    return pools


def draw_glyphs(pool: np.ndarray, count: int, rng: np.random.Generator, what: str) -> np.ndarray:
    """``count`` glyph indices from ``pool`` (with replacement only when the pool is smaller)."""
    if len(pool) == 0:
        raise ConfigError(
            f"{FIELD}.glyph_split",
            f"no glyph images left for {what}; give that split a larger fraction",
        )
    return rng.choice(pool, size=count, replace=len(pool) < count)


def pair_tile(left: np.ndarray, right: np.ndarray, tile_size: int) -> np.ndarray:
    """A ``tile_size²`` tile with two ``tile_size/2`` glyphs side by side in its middle band."""
    cell = tile_size // 2
    tile = np.zeros((tile_size, tile_size), dtype=np.uint8)
    top = cell // 2
    tile[top : top + cell, :cell] = left
    tile[top : top + cell, cell:] = right
    return tile


def tile_slot(position: int, grid: int, size: int) -> tuple[slice, slice]:
    """The rows and columns of tile ``position`` (row-major) of a ``grid × grid`` collage of
    ``size``-pixel tiles."""
    row, column = divmod(int(position), grid)
    return slice(row * size, (row + 1) * size), slice(column * size, (column + 1) * size)

"""Fashion-MNIST (Xiao et al. 2017), read from its IDX files, as a zero-shot retrieval dataset and
as collage glyphs.

The four files ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` are looked for in ``root``
or, by default, in ``/usr/share/datasets/fashion-mnist`` (Debian package
``dataset-fashion-mnist``: ``apt-get install dataset-fashion-mnist``). The official 60,000/10,000
split is a *classification* split (the same 10 classes on both sides), so both files are pooled
and re-split by class (``fashion_mnist``); :mod:`gspdml.data.collage` uses them as glyphs.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import numpy as np

from gspdml.data.arrays import ArrayDataset, pixel_statistics
from gspdml.data.base import DATASETS, DataSplits
from gspdml.data.splits import carve_fold, validation_classes
from gspdml.errors import ConfigError, DataError
from gspdml.registry import documented_by, supplied_by_caller

DEFAULT_ROOT = "/usr/share/datasets/fashion-mnist"
CLASS_NAMES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)


def read_idx(path: Path) -> np.ndarray:
    """An IDX file (magic ``0x00 0x00 <type 0x08 = uint8> <ndim>``, big-endian int32 sizes, data)."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as file:
            data = file.read()
    except (OSError, EOFError) as error:
        raise DataError(f"{path}: cannot read ({error})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise DataError(f"{path}: not an IDX file of unsigned bytes (magic {data[:4].hex()})")
    ndim = data[3]
    shape = tuple(int(v) for v in np.frombuffer(data, dtype=">i4", count=ndim, offset=4))
    expected = int(np.prod(shape)) + 4 + 4 * ndim
    if len(data) != expected:
        raise DataError(f"{path}: {len(data)} bytes, expected {expected} for shape {shape}")
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def _find(root: Path, stem: str, what: str, hint: str) -> Path:
    for name in (f"{stem}.gz", stem):
        if (root / name).is_file():
            return root / name
    raise DataError(f"{what}: missing {root / stem}[.gz] ({hint})")


def idx_files(root: Path, what: str, hint: str = "pass root") -> list[Path]:
    """The four files :func:`load_idx_pairs` reads from ``root``, in its order."""
    stems = [
        f"{part}-{kind}-ubyte"
        for part in ("train", "t10k")
        for kind in ("images-idx3", "labels-idx1")
    ]
    return [_find(root, stem, what, hint) for stem in stems]


def load_idx_pairs(root: Path, what: str, hint: str = "pass root") -> tuple[np.ndarray, np.ndarray]:
    """The images (uint8 ``[N, H, W]``) and labels of the four files
    ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` in ``root`` (the layout of MNIST and of
    Fashion-MNIST), training file first; errors name ``what`` and suggest ``hint``."""
    images, labels = [], []
    for part in ("train", "t10k"):
        x = read_idx(_find(root, f"{part}-images-idx3-ubyte", what, hint))
        y = read_idx(_find(root, f"{part}-labels-idx1-ubyte", what, hint))
        if x.ndim != 3 or y.ndim != 1 or len(x) != len(y):
            raise DataError(f"{what}: {part} images {x.shape} and labels {y.shape} do not match")
        images.append(x)
        labels.append(y.astype(np.int64))
    return np.concatenate(images), np.concatenate(labels)


def load_fashion_mnist(root: Optional[str] = None) -> tuple[np.ndarray, np.ndarray]:
    """All 70,000 images (uint8 ``[N, 28, 28]``) and labels, training file first."""
    return load_idx_pairs(
        Path(root or DEFAULT_ROOT).expanduser(),
        "Fashion-MNIST",
        "apt-get install dataset-fashion-mnist, or pass root",
    )


def load_mnist(root: str) -> tuple[np.ndarray, np.ndarray]:
    """MNIST (LeCun et al. 1998), whose four IDX files have the same names as Fashion-MNIST's:
    all 70,000 digits (uint8 ``[N, 28, 28]``) and labels, training file first."""
    return load_idx_pairs(Path(root).expanduser(), "MNIST", "the folder of the four MNIST files")


def _limit_per_class(
    labels: np.ndarray, limit: Optional[int], rng: np.random.Generator
) -> np.ndarray:
    """Indices keeping at most ``limit`` random items of each class (all when None), sorted."""
    keep = [rng.permutation(np.flatnonzero(labels == c))[:limit] for c in np.unique(labels)]
    return np.sort(np.concatenate(keep))


@DATASETS.register("fashion_mnist")
@supplied_by_caller("seed")
@documented_by(validation_classes)
def fashion_mnist(
    seed: int = 0,
    root: Optional[str] = None,
    class_split: Sequence[int] = (6, 2, 2),
    images_per_class: Optional[int] = None,
    val_fold: Optional[int] = None,
    num_folds: int = 4,
    val_classes: Optional[Sequence[int]] = None,
) -> DataSplits:
    """Fashion-MNIST with class-disjoint train/val/test splits of its sorted classes, 28×28
    single-channel images normalised with the training split's statistics; ``val_fold`` or
    ``val_classes`` need ``class_split[1] = 0`` (:func:`gspdml.data.splits.carve_fold`).

    Args:
        root: the folder of the Fashion-MNIST files.
        class_split: classes of train / validation / test (in sorted order).
        images_per_class: a seeded random subset of each class (null: all 7,000).
    """
    if len(class_split) != 3 or min(class_split) < 0 or class_split[0] < 1 or sum(class_split) > 10:
        raise ConfigError(
            "data.dataset.class_split",
            f"expected (train, val, test) class counts summing to <= 10 with train >= 1, got {tuple(class_split)}",
        )
    images, labels = load_fashion_mnist(root)
    keep = _limit_per_class(
        labels, images_per_class, np.random.default_rng(np.random.SeedSequence([seed, 0xFA5]))
    )
    images, labels = images[keep], labels[keep]
    bounds = np.cumsum([0, *class_split])
    splits = [np.arange(bounds[s], bounds[s + 1]) for s in range(3)]
    mean, std = pixel_statistics(images[np.isin(labels, splits[0])])

    def part(classes: np.ndarray) -> ArrayDataset:
        chosen = np.isin(labels, classes)
        names = [CLASS_NAMES[c] for c in classes]
        return ArrayDataset(
            images[chosen], np.searchsorted(classes, labels[chosen]), mean, std, names
        )

    val_part, test_part = (part(c) if np.isin(labels, c).any() else None for c in splits[1:])
    return carve_fold(
        part(splits[0]),  # the training classes (class_split[0] >= 1)
        val_part,
        test_part,
        dataset="fashion_mnist",
        val_fold=val_fold,
        num_folds=num_folds,
        val_classes=val_classes,
    )

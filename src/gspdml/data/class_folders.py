"""A classification dataset in the ImageFolder layout, as ILSVRC-2012 (ImageNet-1k) is laid out
once its validation images are sorted into class folders::

    root/train/<class>/<image>     one folder per class (ImageNet: n01440764, ...)
    root/val/<class>/<image>       the same class names

and its per-class subsets: ImageNet-20%, "the first 20% of training examples per class of
ImageNet-1k" (Psomas thesis §3.4.1), on which Table 3.12's ResNet-18 trains; evaluation is on the
full validation set. "First" is the order of the file names (sorted), so the subset is the same on
every machine. Any dataset in this layout reads the same way; this module is not an ImageNet
reader of the ILSVRC devkit (its validation labels file).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gspdml.data.images import is_hidden, list_images
from gspdml.errors import DataError

PARTS = ("train", "val")


@dataclass(frozen=True)
class ClassFolders:
    """The images of one part: ``paths`` and ``labels`` (the index of the class folder in
    ``class_names``, sorted by name)."""

    paths: list[Path]
    labels: np.ndarray
    class_names: list[str]


def _classes(folder: Path) -> list[str]:
    if not folder.is_dir():
        raise DataError(
            f"{folder}: not a folder; the ImageFolder layout has train/<class>/ and val/<class>/"
        )
    names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not is_hidden(p.name))
    if not names:
        raise DataError(f"{folder}: no class folders")
    return names


def first_fraction(count: int, fraction: float) -> int:
    """How many of a class's ``count`` images its first ``fraction`` keeps: ``ceil(fraction x
    count)`` (at least one image of every class), all of them for ``fraction`` 1."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    return max(1, math.ceil(fraction * count - 1e-9))


def read_class_folders(root: str | Path, part: str, fraction: float = 1.0) -> ClassFolders:
    """The images of ``root/<part>`` (``train`` or ``val``), keeping the first ``fraction`` of
    each class's files by sorted name (:func:`first_fraction`; ImageNet-20%: ``part="train",
    fraction=0.2``). The classes are those of ``root/train``; a class folder of ``val`` that
    ``train`` lacks, or a class without images, is a :class:`~gspdml.errors.DataError` naming
    the folder."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {PARTS}, got {part!r}")
    base = Path(root).expanduser()
    names = _classes(base / "train")
    extra = sorted(set(_classes(base / part)) - set(names))
    if extra:
        raise DataError(f"{base / part / extra[0]}: a class folder that {base / 'train'} lacks")
    paths: list[Path] = []
    labels: list[int] = []
    for label, name in enumerate(names):
        folder = base / part / name
        files = list_images(folder)[0] if folder.is_dir() else []
        if not files and part == "train":
            raise DataError(f"{folder}: no images of class {name!r}")
        kept = files[: first_fraction(len(files), fraction)] if files else []
        paths += kept
        labels += [label] * len(kept)
    return ClassFolders(paths, np.asarray(labels, dtype=np.int64), names)

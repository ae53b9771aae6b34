"""A user's own images, one folder per class, and CSV lists of images.

``image_folder``::

    <root>/<class>/<image>                       classes split by ``test_fraction``
    <root>/{train,test[,val]}/<class>/<image>    the user's own class-disjoint splits

``csv``: a file with a header and the columns ``path,label[,split]``; ``split`` is one of
``train``, ``val``, ``test``, ``query``, ``gallery`` (query and gallery together replace test).
Relative paths are relative to ``root`` (default: the CSV's folder). Labels may be integers or
names. The file is UTF-8, with or without a byte-order mark
(:func:`gspdml.data.textfiles.read_csv_records`).

Without given splits, the classes (sorted by id, or by name) are split into training classes
and the last ``round(test_fraction · C)`` test classes. Splits that share a class are refused:
retrieval of unseen classes needs class-disjoint splits.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import numpy as np

from gspdml.data.image_splits import OfficialSplits, Records, register_image_dataset
from gspdml.data.images import IMAGE_EXTENSIONS, is_hidden, list_images
from gspdml.data.textfiles import read_csv_records
from gspdml.errors import ConfigError, DataError

SPLIT_NAMES = ("train", "val", "test", "query", "gallery")


def split_last_fraction(records: Records, test_fraction: float, source: str) -> OfficialSplits:
    """Training classes first, the last ``round(test_fraction · C)`` sorted classes for test."""
    if not 0 < test_fraction < 1:
        raise ConfigError("data.dataset.test_fraction", f"must be in (0, 1), got {test_fraction}")
    classes = records.classes
    count = min(max(int(round(test_fraction * len(classes))), 1), len(classes) - 1)
    if len(classes) < 2:
        raise DataError(
            f"{source}: found {len(classes)} class; at least 2 are needed for a class-disjoint split"
        )
    return OfficialSplits(
        train=records.subset(classes[:-count]), test=records.subset(classes[-count:])
    )


def _class_ids(names: list[str]) -> dict[str, int]:
    """Integer labels keep their value; names are numbered in sorted order."""
    unique = sorted(set(names))
    try:
        return {name: int(name) for name in unique}
    except ValueError:
        return {name: i for i, name in enumerate(unique)}


def _assemble(
    parts: dict[str, tuple[list[str], list[str]]], source: str, test_fraction: float
) -> OfficialSplits:
    """Build :class:`OfficialSplits` from ``{split: (paths, label names)}``."""
    ids = _class_ids([label for _, labels in parts.values() for label in labels])
    names = {i: n for n, i in ids.items()}
    records = {
        split: Records(paths, np.array([ids[x] for x in labels], dtype=np.int64), names)
        for split, (paths, labels) in parts.items()
    }
    if set(records) == {"all"}:
        official = split_last_fraction(records["all"], test_fraction, source)
    else:
        unknown = sorted(set(records) - set(SPLIT_NAMES))
        if unknown:
            raise DataError(
                f"{source}: unknown split names {unknown}; allowed: {', '.join(SPLIT_NAMES)}"
            )
        if "train" not in records or not (
            {"test"} <= set(records) or {"query", "gallery"} <= set(records)
        ):
            raise DataError(
                f"{source}: need a train split and either a test split or query and gallery splits, found {sorted(records)}"
            )
        if "test" in records and ({"query", "gallery"} & set(records)):
            raise DataError(
                f"{source}: give either a test split or query and gallery splits, not both"
            )
        official = OfficialSplits(
            records["train"],
            records.get("test"),
            records.get("query"),
            records.get("gallery"),
            records.get("val"),
        )
    official.check_disjoint(source)
    return official


def _visible_folders(folder: Path, skipped: list[str]) -> list[Path]:
    """The sub-folders of ``folder`` that are not hidden or system folders (those go to ``skipped``)."""
    folders = sorted(d for d in folder.iterdir() if d.is_dir())
    skipped += [str(d) for d in folders if is_hidden(d.name)]
    return [d for d in folders if not is_hidden(d.name)]


@register_image_dataset("image_folder", "folder", min_val_classes=2)
def read_image_folder(root: str, test_fraction: float = 0.5) -> OfficialSplits:
    """Images in class folders (see :mod:`gspdml.data.folder`); hidden and system folders and
    files (``.ipynb_checkpoints``, ``__MACOSX``, ``._x.jpg``) are skipped and listed in
    :attr:`OfficialSplits.skipped`, as are images lying outside any class folder.

    Args:
        root: the folder of class folders (or of ``train``/``test`` folders of class folders).
        test_fraction: without a ``test`` folder: the share of the classes that test.
    """
    base = Path(root).expanduser()
    if not base.is_dir():
        raise DataError(f"image folder: {base} is not a directory")
    skipped: list[str] = []
    subdirs = {d.name for d in _visible_folders(base, skipped)}
    given = [s for s in SPLIT_NAMES if s in subdirs]
    layout = {s: base / s for s in given} if "train" in given else {"all": base}
    parts = {}
    for split, folder in layout.items():
        paths, labels = [], []
        skipped += [
            str(p) for p in folder.iterdir() if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
        ]  # no class
        for class_dir in _visible_folders(folder, skipped):
            images, hidden = list_images(class_dir)
            skipped += [str(p) for p in hidden]
            paths += [str(p) for p in images]
            labels += [class_dir.name] * len(images)
        if not paths:
            raise DataError(
                f"image folder: no images in class folders under {folder} (extensions: {', '.join(IMAGE_EXTENSIONS)})"
            )
        parts[split] = (paths, labels)
    official = _assemble(parts, f"image folder {base}", test_fraction)
    official.skipped = sorted(set(skipped))
    return official


@register_image_dataset("csv", "image_csv", min_val_classes=2)
def read_csv(path: str, root: Optional[str] = None, test_fraction: float = 0.5) -> OfficialSplits:
    """Images listed in a CSV file with columns path,label[,split] (see :mod:`gspdml.data.folder`).

    Args:
        path: the CSV file (columns path,label[,split]).
        root: relative paths are joined to this folder (null: the CSV's folder).
        test_fraction: without a split column: the share of the classes that test.
    """
    csv_path = Path(path).expanduser()
    return _assemble(read_csv_rows(csv_path, root), str(csv_path), test_fraction)


def read_csv_rows(
    path: str | Path, root: Optional[str] = None
) -> dict[str, tuple[list[str], list[str]]]:
    """The rows of a CSV list of images (columns path,label[,split], see
    :mod:`gspdml.data.folder`) as ``{split: (paths, label names)}``, split ``"all"`` when the file
    has no split column; relative paths are joined to ``root`` (default: the CSV's folder). A
    path listed twice is a DataError naming both lines."""
    csv_path = Path(path).expanduser()
    if not csv_path.is_file():
        raise DataError(f"{csv_path}: CSV file not found")
    base = Path(root).expanduser() if root is not None else csv_path.parent
    parts: dict[str, tuple[list[str], list[str]]] = {}
    records = read_csv_records(csv_path)
    header = [c.strip() for c in records[0][1]] if records else []
    if not {"path", "label"} <= set(header):
        raise DataError(
            f"{csv_path}:1: the header must name the columns path,label[,split], got {header}"
        )
    has_split = "split" in header
    lines: dict[str, int] = {}  # each path's line
    for line, record in records[1:]:
        row = dict(zip(header, record))
        file_name, label = (row.get("path") or "").strip(), (row.get("label") or "").strip()
        if not file_name or not label:
            raise DataError(f"{csv_path}:{line}: empty path or label in {row}")
        split = (row.get("split") or "").strip().lower() if has_split else "all"
        split = "val" if split == "validation" else split
        if split not in SPLIT_NAMES + ("all",) or (has_split and split == "all"):
            raise DataError(
                f"{csv_path}:{line}: unknown split {row.get('split')!r}; allowed: {', '.join(SPLIT_NAMES)}"
            )
        path, key = str(base / file_name), os.path.normpath(base / file_name)
        if key in lines:
            raise DataError(
                f"{csv_path}:{line}: {file_name} is listed again (first on line {lines[key]}); "
                "an image listed twice would be its own nearest neighbour: remove the repeat"
            )
        lines[key] = line
        paths, labels = parts.setdefault(split, ([], []))
        paths.append(path)
        labels.append(label)
    if not parts:
        raise DataError(f"{csv_path}: no rows")
    return parts

"""Where retrieval images come from: a folder, a CSV list, or a split of the run's dataset. They
are embedded by :func:`gspdml.models.inference.embed`, like every evaluation split; a labelled
folder or CSV list (or a query and a gallery of them) is also an evaluation split of its own
(:func:`labelled_split`, ``gspdml evaluate --images`` / ``--query --gallery``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from gspdml.config import RunConfig
from gspdml.data.base import EvalSplit, LabelledDataset
from gspdml.data.eval_transform import tensor_display
from gspdml.data.folder import read_csv_rows
from gspdml.data.images import IMAGE_EXTENSIONS, list_images
from gspdml.errors import ConfigError, DataError
from gspdml.file_digest import file_sha256
from gspdml.retrieval.preprocessing import ImageTransform, load_model_input
from gspdml.training.run_dir import build_run_data

SPLITS = ("train", "val", "test")
#: folders of a split layout (``root/train/<class>/...``), as gspdml.data.folder reads them
SPLIT_FOLDERS = ("train", "val", "test", "query", "gallery")


def list_image_folder(
    root: str | os.PathLike[str],
) -> tuple[list[str], list[Optional[str]], list[str]]:
    """Image files under ``root`` (recursive, sorted, absolute), their labels, and the hidden or
    system entries skipped (:func:`gspdml.data.images.list_images`). A file's label is its
    sub-folder of ``root`` (``ImageFolder``), or the one below when every sub-folder is a split
    (``root/train/<class>``); files directly in ``root`` or a split folder have none (None)."""
    root = Path(root).resolve()
    if not root.is_dir():
        raise DataError(f"{root}: not a folder of images")
    files, skipped = list_images(root)
    if not files:
        raise DataError(f"{root}: no image files (extensions {', '.join(IMAGE_EXTENSIONS)})")
    parts = [p.relative_to(root).parts for p in files]
    tops = {rel[0] for rel in parts if len(rel) > 1}
    depth = 1 if tops and tops <= set(SPLIT_FOLDERS) else 0
    labels = [rel[depth] if len(rel) > depth + 1 else None for rel in parts]
    return [str(p) for p in files], labels, [str(p) for p in skipped]


class ImageFiles(Dataset[tuple[torch.Tensor, int]]):
    """Image files as a dataset of ``(image tensor, position)``, decoded with ``transform``."""

    def __init__(
        self, paths: Sequence[str], labels: Sequence[Optional[str]], transform: ImageTransform
    ):
        if len(paths) != len(labels):
            raise ValueError(f"{len(paths)} paths but {len(labels)} labels")
        self.paths, self.item_labels, self.transform = list(paths), list(labels), transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return load_model_input(self.paths[i], self.transform), i


@dataclass
class ImageSource:
    """What an index or a report is built from: a dataset of ``(image, _)`` items plus one path
    (or name) and one label per item; ``to_display`` maps a model input ``[C, H, W]`` back to a
    picture ``[H, W, C]`` in [0, 1] (min-max scaling when the normalisation is unknown)."""

    dataset: Dataset[Any]
    paths: list[str]
    labels: list[Optional[str]]
    to_display: Callable[[torch.Tensor], np.ndarray] = tensor_display
    skipped: list[str] = field(default_factory=list)  # hidden or system entries left out

    def subset(self, items: Sequence[int]) -> ImageSource:
        """The source restricted to ``items`` (positions), in that order."""
        items = list(items)
        return ImageSource(
            Subset(self.dataset, items),
            [self.paths[i] for i in items],
            [self.labels[i] for i in items],
            self.to_display,
            self.skipped,
        )


def skipped_notes(source: ImageSource, skipped: Mapping[str, str]) -> list[str]:
    """A line naming every hidden entry of ``source`` and every undecodable file (``skipped``:
    ``{path: problem}``) that was left out."""
    hidden = [f"skipped hidden or system entry {path}" for path in source.skipped]
    return hidden + [f"skipped {path}: {why}" for path, why in skipped.items()]


def folder_source(root: str | os.PathLike[str], transform: ImageTransform) -> ImageSource:
    return _files_source(*list_image_folder(root), transform)


def _files_source(
    paths: list[str], labels: list[Optional[str]], skipped: list[str], transform: ImageTransform
) -> ImageSource:
    files = ImageFiles(paths, labels, transform)
    return ImageSource(files, paths, labels, transform.to_display, skipped)


def split_source(config: RunConfig, split: str) -> ImageSource:
    """A split of the run's dataset: an evaluation split's gallery, else its query set; items
    named by the dataset's ``paths`` (else ``<split>/<position>``), labelled by its
    ``class_names`` (else the class ids as text)."""
    if split not in SPLITS:
        raise ConfigError("split", f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    part = getattr(build_run_data(config), split)
    if part is None:
        raise ConfigError("split", f"the dataset has no {split!r} split")
    if split != "train":
        part = part.gallery if part.gallery is not None else part.query
    dataset, paths = part, getattr(part, "paths", None)
    names = (
        [f"{split}/{i}" for i in range(len(dataset))] if paths is None else list(map(str, paths))
    )
    class_names = getattr(dataset, "class_names", None)
    labels: list[Optional[str]] = [
        str(class_names[label]) if class_names is not None else str(int(label))
        for label in dataset.labels
    ]
    return ImageSource(dataset, names, labels)


def labelled_source(path: str | os.PathLike[str], transform: ImageTransform) -> ImageSource:
    """Labelled images for an evaluation: a folder (:func:`list_image_folder`) or a CSV file with
    the columns ``path,label`` (:func:`gspdml.data.folder.read_csv_rows`). Every image needs a
    label."""
    path = Path(path).expanduser()
    if not (path.is_file() and path.suffix.lower() == ".csv"):
        paths, labels, skipped = list_image_folder(path)
    else:
        parts = read_csv_rows(path)
        if set(parts) != {"all"}:
            raise ConfigError(
                str(path),
                f"has a split column ({', '.join(sorted(parts))}); give a CSV of the images to "
                "evaluate (columns path,label), or two of them with --query and --gallery",
            )
        paths, labels, skipped = list(parts["all"][0]), list(parts["all"][1]), []
    unlabelled = [p for p, label in zip(paths, labels) if label is None]
    if unlabelled:
        raise DataError(
            f"{path}: {len(unlabelled)} images lie outside any class folder (e.g. "
            f"{unlabelled[0]}); an evaluation needs the class of every image: put each in a "
            "folder named by its class"
        )
    return _files_source(paths, labels, skipped, transform)


class _ClassIds(LabelledDataset):
    """A source's images as ``(image, class id)`` items."""

    def __init__(self, source: ImageSource, ids: Mapping[Optional[str], int]):
        self.source = source
        self.labels = np.array([ids[label] for label in source.labels], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.source.dataset[i][0], int(self.labels[i])


def _content(path: str) -> str:
    """What identifies an image: its content hash (the same file, or a copy of it, under any
    name), or its resolved path when it cannot be read (the loader names that file later)."""
    try:
        return file_sha256(path)
    except OSError:
        return str(Path(path).resolve())


def distinct_images(source: ImageSource, where: str) -> tuple[ImageSource, list[tuple[str, str]]]:
    """``source`` without its repeated images (a file listed twice, or two files of the same
    bytes), keeping the first of each, and the ``(left out, kept)`` pairs. An image repeated
    under another label is a :class:`DataError` naming both (``where``: the source's name)."""
    first: dict[str, int] = {}
    kept, repeats = [], []
    for i, (path, label) in enumerate(zip(source.paths, source.labels)):
        j = first.setdefault(_content(path), i)
        if j == i:
            kept.append(i)
        elif source.labels[j] != label:
            raise DataError(
                f"{where}: {path} (label {label!r}) is the same image as {source.paths[j]} "
                f"(label {source.labels[j]!r}); an image has one class: remove one of them"
            )
        else:
            repeats.append((path, source.paths[j]))
    return (source.subset(kept) if repeats else source), repeats


def evaluation_images(
    images: Mapping[str, str], transform: ImageTransform
) -> tuple[EvalSplit, dict[str, Any], list[str]]:
    """The evaluation split of ``gspdml evaluate --images PATH`` or ``--query PATH --gallery
    PATH``, what the report says it did, and the notes to print. No query is ranked against
    itself: an image held twice (by content) is evaluated once (``duplicates_left_out``); a
    query and a gallery of the same images are evaluated leave-one-out; a query and a gallery
    that share only some images are refused."""
    sources, report, notes = {}, {}, []
    left_out = 0
    for name, path in images.items():
        source = labelled_source(path, transform)
        notes += skipped_notes(source, {})
        source, repeats = distinct_images(source, path)
        left_out += len(repeats)
        notes += [f"{path}: {copy} is the same image as {kept}; left out" for copy, kept in repeats]
        sources[name] = source
    if left_out:
        report["duplicates_left_out"] = left_out
    if "images" in sources:
        return labelled_split(sources["images"]), {**report, "protocol": "leave-one-out"}, notes
    query, gallery = sources["query"], sources["gallery"]
    in_query = {_content(p): (p, label) for p, label in zip(query.paths, query.labels)}
    shared = []
    for path, label in zip(gallery.paths, gallery.labels):
        twin = in_query.get(_content(path))
        if twin is not None and twin[1] != label:
            raise DataError(
                f"{path} (gallery label {label!r}) is the same image as the query {twin[0]} "
                f"(label {twin[1]!r}); an image has one class: give it the same label in both"
            )
        if twin is not None:
            shared.append((twin[0], path))
    if not shared:
        return labelled_split(query, gallery), {**report, "protocol": "query -> gallery"}, notes
    if len(shared) == len(query.paths) == len(gallery.paths):
        notes.append(
            f"the query and the gallery are the same {len(shared)} images: evaluated "
            "leave-one-out (each query's own image left out of its ranking)"
        )
        return labelled_split(query), {**report, "protocol": "leave-one-out"}, notes
    example = f"e.g. {shared[0][0]} is the same image as {shared[0][1]}"
    raise DataError(
        f"{len(shared)} of the {len(query.paths)} query images are also in the gallery "
        f"({example}): each would find itself at rank 1. Give a gallery without the query "
        f"images, or evaluate one set leave-one-out with --images"
    )


def labelled_split(query: ImageSource, gallery: Optional[ImageSource] = None) -> EvalSplit:
    """The evaluation split of labelled sources (:func:`labelled_source`): leave-one-out on
    ``query``, or query -> ``gallery``; class ids are shared by label name."""
    names = sorted({str(x) for src in (query, gallery) if src is not None for x in src.labels})
    ids: dict[Optional[str], int] = {name: i for i, name in enumerate(names)}
    return EvalSplit(_ClassIds(query, ids), None if gallery is None else _ClassIds(gallery, ids))

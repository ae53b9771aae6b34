"""Where retrieval images come from: a folder, a CSV list, or a split of the run's dataset. They
are embedded by :func:`gspdml.models.inference.embed`, like every evaluation split; a labelled
folder or CSV list (or a query and a gallery of them) is also an evaluation split of its own
(:func:`labelled_split`, ``gspdml evaluate --images`` / ``--query --gallery``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, Subset

from gspdml.data.base import EvalSplit, LabelledDataset
from gspdml.data.eval_transform import tensor_display
from gspdml.data.folder import read_csv_rows
from gspdml.data.images import IMAGE_EXTENSIONS, list_images
from gspdml.errors import ConfigError, DataError
from gspdml.retrieval.preprocessing import ImageTransform, load_model_input
from gspdml.training.run_dir import build_run_data

SPLITS = ("train", "val", "test")
#: folders of a split layout (``root/train/<class>/...``), as gspdml.data.folder reads them
SPLIT_FOLDERS = ("train", "val", "test", "query", "gallery")


def list_image_folder(
    root: str | os.PathLike[str],
) -> tuple[list[str], list[Optional[str]], list[str]]:
    """Image files under ``root`` (recursive, sorted), their labels, and the hidden or system
    files and folders that were skipped (:func:`gspdml.data.images.list_images`).

    The label of a file is the name of the sub-folder of ``root`` that contains it (the
    ``ImageFolder`` convention), or of the sub-folder below that when every sub-folder of
    ``root`` is a split (``root/train/<class>``, ``root/test/<class>``); files directly in
    ``root`` (or in a split folder) have no label (None). Paths are absolute, so an index stays
    valid when the working directory changes.
    """
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


class ImageFiles(Dataset):
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

    dataset: Dataset
    paths: list[str]
    labels: list[Optional[str]]
    to_display: Callable[[torch.Tensor], np.ndarray] = tensor_display
    skipped: list[str] = field(default_factory=list)  # hidden or system entries left out

    def subset(self, items: Sequence[int]) -> "ImageSource":
        """The source restricted to ``items`` (positions), in that order."""
        items = list(items)
        return ImageSource(
            Subset(self.dataset, items),
            [self.paths[i] for i in items],
            [self.labels[i] for i in items],
            self.to_display,
            self.skipped,
        )


def folder_source(root: str | os.PathLike[str], transform: ImageTransform) -> ImageSource:
    paths, labels, skipped = list_image_folder(root)
    return ImageSource(
        ImageFiles(paths, labels, transform), paths, labels, transform.to_display, skipped
    )


def split_source(config: Mapping[str, Any], split: str) -> ImageSource:
    """A split of the run's dataset (``data.dataset`` of its config). Evaluation splits give their
    gallery when they have one, else their query set. Items are named by the dataset's ``paths``
    when it has them, ``<split>/<position>`` otherwise; labels are the dataset's ``class_names``
    when it has them, the class ids as text otherwise."""
    if split not in SPLITS:
        raise ConfigError("split", f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    # build_run_data reads any mapping; training/run_dir.py annotates it as a dict
    part = getattr(build_run_data(config), split)  # type: ignore[arg-type]
    if part is None:
        raise ConfigError("split", f"the dataset has no {split!r} split")
    dataset = (
        part if split == "train" else (part.gallery if part.gallery is not None else part.query)
    )
    paths = getattr(dataset, "paths", None)
    names = (
        [str(p) for p in paths]
        if paths is not None
        else [f"{split}/{i}" for i in range(len(dataset))]
    )
    class_names = getattr(dataset, "class_names", None)
    labels: list[Optional[str]] = [
        str(class_names[label]) if class_names is not None else str(int(label))
        for label in dataset.labels
    ]
    return ImageSource(dataset, names, labels)


def labelled_source(path: str | os.PathLike[str], transform: ImageTransform) -> ImageSource:
    """Labelled images for an evaluation: a folder read as ``gspdml index`` reads one
    (:func:`list_image_folder`: the label of a file is its class folder) or a CSV file with the
    columns ``path,label`` (:func:`gspdml.data.folder.read_csv_rows`; relative paths are
    relative to the CSV's folder). Every image needs a label."""
    path = Path(path).expanduser()
    if path.is_file() and path.suffix.lower() == ".csv":
        parts = read_csv_rows(path)
        if set(parts) != {"all"}:
            raise ConfigError(
                str(path),
                f"has a split column ({', '.join(sorted(parts))}); give a CSV of the images to "
                "evaluate (columns path,label), or two of them with --query and --gallery",
            )
        paths, names = parts["all"]
        labels: list[Optional[str]] = list(names)
        skipped: list[str] = []
    else:
        paths, labels, skipped = list_image_folder(path)
    unlabelled = [p for p, label in zip(paths, labels) if label is None]
    if unlabelled:
        raise DataError(
            f"{path}: {len(unlabelled)} images lie outside any class folder (e.g. "
            f"{unlabelled[0]}); an evaluation needs the class of every image: put each in a "
            "folder named by its class"
        )
    return ImageSource(
        ImageFiles(paths, labels, transform), paths, labels, transform.to_display, skipped
    )


class _ClassIds(LabelledDataset):
    """A source's images as ``(image, class id)`` items."""

    def __init__(self, source: ImageSource, ids: Mapping[Optional[str], int]):
        self.source = source
        self.labels = np.array([ids[label] for label in source.labels], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.source.dataset[i][0], int(self.labels[i])


def labelled_split(query: ImageSource, gallery: Optional[ImageSource] = None) -> EvalSplit:
    """The evaluation split of labelled sources (:func:`labelled_source`): leave-one-out on
    ``query``, or query -> ``gallery``; class ids are shared by label name."""
    names = sorted({str(x) for src in (query, gallery) if src is not None for x in src.labels})
    ids: dict[Optional[str], int] = {name: i for i, name in enumerate(names)}
    return EvalSplit(_ClassIds(query, ids), None if gallery is None else _ClassIds(gallery, ids))

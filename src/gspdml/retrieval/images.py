"""Where retrieval images come from: a folder, or a split of the run's dataset. They are
embedded by :func:`gspdml.training.inference.embed`, like every evaluation split."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from gspdml.data.images import IMAGE_EXTENSIONS
from gspdml.errors import ConfigError, DataError
from gspdml.retrieval.run import build_run_data
from gspdml.retrieval.transforms import ImageTransform, display_range, load_image

SPLITS = ("train", "val", "test")


def list_image_folder(root: str | Path) -> tuple[list[str], list[Optional[str]]]:
    """Image files under ``root`` (recursive, sorted) and their labels.

    The label of a file is the name of the sub-folder of ``root`` that contains it (the
    ``ImageFolder`` convention); files directly in ``root`` have no label (None). Paths are
    absolute, so an index stays valid when the working directory changes.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise DataError(f"{root}: not a folder of images")
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
    if not files:
        raise DataError(f"{root}: no image files (extensions {', '.join(IMAGE_EXTENSIONS)})")
    labels = [p.relative_to(root).parts[0] if len(p.relative_to(root).parts) > 1 else None for p in files]
    return [str(p) for p in files], labels


class ImageFiles(Dataset):
    """Image files as a dataset of ``(image tensor, position)``, decoded with ``transform``."""

    def __init__(self, paths: Sequence[str], labels: Sequence[Optional[str]], transform: ImageTransform):
        if len(paths) != len(labels):
            raise ValueError(f"{len(paths)} paths but {len(labels)} labels")
        self.paths, self.item_labels, self.transform = list(paths), list(labels), transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int):
        return load_image(self.paths[i], self.transform), i


def _tensor_to_display(image: torch.Tensor) -> np.ndarray:
    return display_range(image.detach().float().cpu().permute(1, 2, 0).numpy())


@dataclass
class ImageSource:
    """What an index or a report is built from: a dataset of ``(image, _)`` items plus one path
    (or name) and one label per item; ``to_display`` maps a model input ``[C, H, W]`` back to a
    picture ``[H, W, C]`` in [0, 1] (min-max scaling when the normalisation is unknown)."""

    dataset: Dataset
    paths: list[str]
    labels: list[Optional[str]]
    to_display: Callable[[torch.Tensor], np.ndarray] = _tensor_to_display


def folder_source(root: str | Path, transform: ImageTransform) -> ImageSource:
    paths, labels = list_image_folder(root)
    return ImageSource(ImageFiles(paths, labels, transform), paths, labels, transform.to_display)


def split_source(config: dict[str, Any], split: str) -> ImageSource:
    """A split of the run's dataset (``data.dataset`` of its config). Evaluation splits give their
    gallery when they have one, else their query set. Items are named by the dataset's ``paths``
    when it has them, ``<split>/<position>`` otherwise; labels are the dataset's ``class_names``
    when it has them, the class ids as text otherwise."""
    if split not in SPLITS:
        raise ConfigError("split", f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    part = getattr(build_run_data(config), split)
    if part is None:
        raise ConfigError("split", f"the dataset has no {split!r} split")
    dataset = part if split == "train" else (part.gallery if part.gallery is not None else part.query)
    paths = getattr(dataset, "paths", None)
    names = [str(p) for p in paths] if paths is not None else [f"{split}/{i}" for i in range(len(dataset))]
    class_names = getattr(dataset, "class_names", None)
    labels = [str(class_names[label]) if class_names is not None else str(int(label)) for label in dataset.labels]
    return ImageSource(dataset, names, labels)

"""ImageNet-1k (ILSVRC2012, Russakovsky et al., IJCV 2015) in its official release layout, read
for classification: the training images and the 50,000 validation images with their labels.

Layout under the root (each as the release extracts it)::

    train/<wnid>/<wnid>_<n>.JPEG          ILSVRC2012_img_train.tar, one folder per class
    val/<wnid>/ILSVRC2012_val_<n>.JPEG    the validation images sorted into class folders, or
    val/ILSVRC2012_val_<n>.JPEG           flat, labelled by one of
      LOC_val_solution.csv                ImageId,PredictionString ("<wnid> x0 y0 x1 y1 ..."),
                                          the localisation release (Kaggle's ImageNet Object
                                          Localization Challenge); the first wnid labels it
      ILSVRC2012_devkit_t12/data/ILSVRC2012_validation_ground_truth.txt
                                          one ILSVRC2012_ID (1-1000) per line, in the order of the
                                          sorted file names, the IDs' wnids in the devkit's
                                          data/meta.mat (``synsets``: ILSVRC2012_ID, WNID)
    LOC_synset_mapping.txt                optional: "<wnid> <words>" per line, the class order

Labels: the position of a class's wnid in ``LOC_synset_mapping.txt`` where the root has it,
otherwise in the sorted wnids of ``train/`` (the same order: the file lists the sorted wnids).
``fraction`` < 1 keeps, per class, the first ``ceil(fraction · n)`` of its ``n`` training images
in sorted file-name order; ``per_class`` keeps the first ``per_class`` images of each class
instead, as the SimPool authors' ``--subset`` does (ImageNet-20%, Psomas thesis §3.4.3:
``per_class=260``, 260 of about 1,281 images per class). The validation set is always whole. Hidden files and folders are left out and reported in
:attr:`ImageNet.skipped`; an unlabelled validation image, a label naming an unknown class or a
class without training images is a :class:`~gspdml.errors.DataError` naming the file.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gspdml.data.files import ImageFileDataset
from gspdml.data.images import is_hidden, list_images
from gspdml.data.textfiles import read_csv_records, read_text
from gspdml.errors import ConfigError, DataError

SOURCE = "imagenet"
SYNSETS = "LOC_synset_mapping.txt"
SOLUTION = "LOC_val_solution.csv"
DEVKIT = Path("ILSVRC2012_devkit_t12") / "data"
GROUND_TRUTH = DEVKIT / "ILSVRC2012_validation_ground_truth.txt"
META = DEVKIT / "meta.mat"


@dataclass(frozen=True)
class ImageSet:
    """Image files and their labels (int64, positions in :attr:`ImageNet.wnids`)."""

    paths: tuple[str, ...]
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.paths)

    def dataset(self, transform: Callable[..., Any]) -> ImageFileDataset:
        """The images as ``(transform(image), label)`` items."""
        return ImageFileDataset(list(self.paths), self.labels, transform, check="none")


@dataclass(frozen=True)
class ImageNet:
    """The classes (``wnids``, label ``i`` is ``wnids[i]``), the training and validation
    images, and what the reader left out (``skipped``)."""

    wnids: tuple[str, ...]
    train: ImageSet
    val: ImageSet
    skipped: tuple[str, ...] = ()


def _folders(folder: Path, skipped: list[str]) -> list[Path]:
    """The visible class folders of ``folder`` (sorted); hidden entries go to ``skipped``."""
    found = []
    for entry in sorted(folder.iterdir()):
        if is_hidden(entry.name):
            skipped.append(str(entry))
        elif entry.is_dir():
            found.append(entry)
    return found


def _class_order(root: Path, train: list[Path]) -> tuple[str, ...]:
    """The wnids in label order: ``LOC_synset_mapping.txt`` where given, else sorted."""
    mapping = root / SYNSETS
    if not mapping.is_file():
        return tuple(folder.name for folder in train)
    wnids = tuple(line.split()[0] for line in read_text(mapping).splitlines() if line.strip())
    unknown = sorted({folder.name for folder in train} - set(wnids))
    if unknown:
        raise DataError(
            f"{root / 'train'}: class folders {unknown[:5]} are not in {mapping}; remove them or "
            "use the mapping file of this release"
        )
    return wnids


def _train(
    folders: list[Path],
    index: dict[str, int],
    keep: Callable[[int], int],
    skipped: list[str],
) -> ImageSet:
    """The training images of each class folder, the first ``keep(n)`` of its ``n``."""
    paths: list[str] = []
    labels: list[int] = []
    for folder in folders:
        images, hidden = list_images(folder)
        skipped.extend(map(str, hidden))
        if not images:
            raise DataError(f"{folder}: a class folder without images; remove it or restore them")
        if keep(len(images)) > len(images):
            raise DataError(
                f"{folder}: {len(images)} images, fewer than the {keep(len(images))} per class "
                "asked for; ask for fewer (per_class) or restore the class's images"
            )
        kept = images[: keep(len(images))]
        paths += map(str, kept)
        labels += [index[folder.name]] * len(kept)
    return ImageSet(tuple(paths), np.asarray(labels, dtype=np.int64))


def _label(index: dict[str, int], wnid: str, where: str) -> int:
    if wnid not in index:
        raise DataError(f"{where}: class {wnid!r} is not a class of the training set")
    return index[wnid]


def _solution_labels(path: Path, index: dict[str, int]) -> dict[str, int]:
    """``LOC_val_solution.csv``: image id -> label (the first wnid of its boxes)."""
    records = read_csv_records(path)
    if not records or records[0][1][:2] != ["ImageId", "PredictionString"]:
        raise DataError(f"{path}:1: expected the header ImageId,PredictionString")
    labels = {}
    for line, record in records[1:]:
        if len(record) != 2 or not record[1].split():
            raise DataError(f"{path}:{line}: expected ImageId,PredictionString, got {record}")
        labels[record[0]] = _label(index, record[1].split()[0], f"{path}:{line}")
    return labels


def _devkit_labels(root: Path, images: list[Path], index: dict[str, int]) -> dict[str, int]:
    """The devkit's ground truth: line i labels the i-th sorted image by its ILSVRC2012_ID."""
    import scipy.io  # only when the devkit is read

    truth, meta = root / GROUND_TRUTH, root / META
    if not meta.is_file():
        raise DataError(f"{truth}: its class ids need the devkit's {meta}, which is missing")
    synsets = scipy.io.loadmat(str(meta), squeeze_me=True)["synsets"]
    wnid_of = {int(s["ILSVRC2012_ID"]): str(s["WNID"]) for s in np.atleast_1d(synsets)}
    lines = [line.strip() for line in read_text(truth).splitlines() if line.strip()]
    if len(lines) != len(images):
        raise DataError(
            f"{truth}: {len(lines)} labels for the {len(images)} images of {root / 'val'}; "
            "the flat val/ folder must hold exactly the 50,000 validation images"
        )
    labels = {}
    for number, (text, image) in enumerate(zip(lines, images), 1):
        if not text.isdigit() or int(text) not in wnid_of:
            raise DataError(f"{truth}:{number}: {text!r} is not an ILSVRC2012_ID of {meta}")
        labels[image.stem] = _label(index, wnid_of[int(text)], f"{truth}:{number}")
    return labels


def _val(root: Path, index: dict[str, int], skipped: list[str]) -> ImageSet:
    """The validation images: class folders, or a flat folder with a label file."""
    folder = root / "val"
    if not folder.is_dir():
        raise DataError(f"{SOURCE}: missing {folder} (the validation images)")
    images, hidden = list_images(folder)
    skipped.extend(map(str, hidden))
    if not images:
        raise DataError(f"{folder}: no validation images")
    if any(image.parent != folder for image in images):  # val/<wnid>/*.JPEG
        labels = [_label(index, image.parent.name, str(image.parent)) for image in images]
        return ImageSet(tuple(map(str, images)), np.asarray(labels, dtype=np.int64))
    if (root / SOLUTION).is_file():
        by_id = _solution_labels(root / SOLUTION, index)
        source = root / SOLUTION
    elif (root / GROUND_TRUTH).is_file():
        by_id, source = _devkit_labels(root, images, index), root / GROUND_TRUTH
    else:
        raise DataError(
            f"{folder}: flat validation images need their labels: {root / SOLUTION} or "
            f"{root / GROUND_TRUTH} (with meta.mat), or sort them into val/<wnid>/ folders"
        )
    missing = [image.name for image in images if image.stem not in by_id]
    if missing:
        raise DataError(f"{source}: no label for {len(missing)} images of {folder}: {missing[:5]}")
    labels = [by_id[image.stem] for image in images]
    return ImageSet(tuple(map(str, images)), np.asarray(labels, dtype=np.int64))


def read_imagenet(
    root: str | Path, fraction: float = 1.0, per_class: Optional[int] = None
) -> ImageNet:
    """ImageNet-1k under ``root`` in the official layout (module doc), ``fraction`` of each
    class's training images or its first ``per_class``."""
    if not 0 < fraction <= 1:
        raise ConfigError("fraction", f"must be in (0, 1], got {fraction}")
    if per_class is not None and (per_class < 1 or fraction != 1):
        raise ConfigError(
            "per_class", f"must be a positive count, and fraction 1, got {per_class} ({fraction})"
        )
    root = Path(root).expanduser()
    if not (root / "train").is_dir():
        raise DataError(f"{SOURCE}: missing {root / 'train'} (one folder per class, train/<wnid>/)")
    skipped: list[str] = []
    folders = _folders(root / "train", skipped)
    if not folders:
        raise DataError(f"{root / 'train'}: no class folders")
    wnids = _class_order(root, folders)
    index = {wnid: i for i, wnid in enumerate(wnids)}

    def keep(count: int) -> int:
        return per_class if per_class is not None else math.ceil(fraction * count)

    train = _train(folders, index, keep, skipped)
    return ImageNet(wnids, train, _val(root, index, skipped), tuple(skipped))

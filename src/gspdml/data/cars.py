"""Cars196 (Krause et al. 2013) in any of its three common layouts:

* the original: ``<root>/cars_annos.mat`` + ``<root>/car_ims/*.jpg`` (what most papers and
  powerful-benchmarker use). ``annotations`` holds ``relative_im_path``, ``class`` (1..196)
  and ``test``; the ``test`` flag is the *classification* split and is ignored;
* the devkit release (what torchvision's ``StanfordCars`` and TensorFlow Datasets read):
  ``<root>/cars_train/*.jpg`` listed by ``<root>/devkit/cars_train_annos.mat``,
  ``<root>/cars_test/*.jpg`` listed by ``cars_test_annos_withlabels.mat`` (in ``<root>`` or
  ``<root>/devkit``), class names in ``<root>/devkit/cars_meta.mat``. Its ``class`` ids are those
  of ``cars_annos.mat``; the two classification halves are merged and re-split by class;
* class folders: ``<root>/[car_data/[car_data/]]{train,test}/<class name>/*.jpg`` (the Kaggle
  "stanford-car-dataset-by-classes-folder" layout). Both folders hold all 196 classes, so they
  are merged and re-split by class. The class ids are the line numbers of ``names.csv`` when it is
  present (the official order), else the sorted folder names (then the 98/98 split may differ
  from the papers', and a warning says so).

Zero-shot split (Gürbüz thesis §5.3.4.1): the first 98 classes (8,054 images) train, the last 98 (8,131) test.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from gspdml.data.image_splits import (
    OfficialSplits,
    Records,
    register_image_dataset,
    split_first_half,
)
from gspdml.data.images import IMAGE_EXTENSIONS
from gspdml.data.textfiles import read_text, require_file
from gspdml.errors import DataError

SOURCE = "Cars196"
EXPECTED = dict(
    images=16185, train_images=8054, test_images=8131, train_classes=98, test_classes=98
)
FOLDER_BASES = (".", "car_data", "car_data/car_data")
#: the devkit release: (annotation file candidates, image folder) of its two halves
DEVKIT_PARTS = (
    (("devkit/cars_train_annos.mat",), "cars_train"),
    (("cars_test_annos_withlabels.mat", "devkit/cars_test_annos_withlabels.mat"), "cars_test"),
)


def _scalar(value: Any) -> Any:
    """A MATLAB struct field (nested 1x1 arrays) as a Python scalar."""
    return np.asarray(value).reshape(-1)[0]


def _load_mat(path: Path, fields: tuple[str, ...]) -> tuple[dict[str, Any], list[str], np.ndarray]:
    """``(mat, files, labels)`` of an annotation file whose struct array ``annotations`` has the
    ``fields`` (file name field, class field); DataError naming the file when it does not."""
    import scipy.io  # ~0.4 s to import: only when Cars196 is read

    try:
        mat = scipy.io.loadmat(str(path))
        annotations = np.asarray(mat["annotations"]).reshape(-1)
        files = [str(_scalar(a[fields[0]])) for a in annotations]
        labels = np.array([int(_scalar(a[fields[1]])) for a in annotations])
    except (KeyError, ValueError, IndexError, TypeError, NotImplementedError, OSError) as error:
        raise DataError(
            f"{path}: malformed annotation file, expected a struct array 'annotations' with "
            f"fields {' and '.join(fields)} ({type(error).__name__}: {error})"
        ) from None
    return mat, files, labels


def _class_names(mat: dict[str, Any]) -> dict[int, str]:
    if "class_names" not in mat:
        return {}
    return {
        i + 1: str(_scalar(n)) for i, n in enumerate(np.asarray(mat["class_names"]).reshape(-1))
    }


def read_annotations(root: Path) -> Records:
    """The records listed in ``cars_annos.mat``."""
    mat, files, labels = _load_mat(
        require_file(root / "cars_annos.mat", SOURCE), ("relative_im_path", "class")
    )
    return Records([str(root / f) for f in files], labels, _class_names(mat))


def read_devkit(root: Path) -> Records:
    """The records of both halves of the devkit release (the test half needs its labelled
    annotation file: the devkit's own ``cars_test_annos.mat`` has no classes)."""
    paths, labels = [], []
    for candidates, folder in DEVKIT_PARTS:
        found = next((root / c for c in candidates if (root / c).is_file()), None)
        if found is None:
            raise DataError(
                f"{SOURCE}: devkit layout under {root} lacks {' or '.join(str(root / c) for c in candidates)}"
            )
        _, files, part_labels = _load_mat(found, ("fname", "class"))
        paths += [str(root / folder / f) for f in files]
        labels.append(part_labels)
    meta = root / "devkit" / "cars_meta.mat"
    import scipy.io

    names = _class_names(scipy.io.loadmat(str(meta))) if meta.is_file() else {}
    return Records(paths, np.concatenate(labels), names)


def read_class_folders(base: Path) -> Records:
    """The images of ``base/{train,test}/<class>/``, labelled by ``names.csv`` order if present."""
    folders = sorted(
        {d.name for part in ("train", "test") for d in (base / part).iterdir() if d.is_dir()}
    )
    candidates = (base / "names.csv", base.parent / "names.csv", base.parent.parent / "names.csv")
    names_file = next((p for p in candidates if p.is_file()), None)
    if names_file is not None:
        order = [line.strip() for line in read_text(names_file).splitlines() if line.strip()]
        unknown = sorted(set(folders) - set(order))
        if unknown:
            raise DataError(
                f"{names_file}: class folders missing from the class list, e.g. {unknown[:3]}"
            )
        ids = {name: i + 1 for i, name in enumerate(order)}
    else:
        warnings.warn(
            f"{SOURCE}: no names.csv next to {base}; class ids follow the sorted folder names, "
            "so the 98/98 split may differ from the published one",
            stacklevel=3,
        )
        ids = {name: i + 1 for i, name in enumerate(folders)}
    paths, labels = [], []
    for part in ("train", "test"):
        for folder in sorted(d for d in (base / part).iterdir() if d.is_dir()):
            for file in sorted(folder.iterdir()):
                if file.suffix.lower() in IMAGE_EXTENSIONS:
                    paths.append(str(file))
                    labels.append(ids[folder.name])
    return Records(paths, np.array(labels), {i: n for n, i in ids.items()})


@register_image_dataset("cars196", "cars")
def read_cars(root: str) -> OfficialSplits:
    """Cars196, zero-shot 98/98 class split (see :mod:`gspdml.data.cars`).

    Args:
        root: the dataset's folder (``cars_annos.mat``, the devkit or class folders).
    """
    root_path = Path(root).expanduser()
    if (root_path / "cars_annos.mat").is_file():
        records = read_annotations(root_path)
    elif (root_path / DEVKIT_PARTS[0][0][0]).is_file():
        records = read_devkit(root_path)
    else:
        bases = [root_path / b for b in FOLDER_BASES]
        base = next((b for b in bases if (b / "train").is_dir() and (b / "test").is_dir()), None)
        if base is None:
            raise DataError(
                f"{SOURCE}: missing {root_path / 'cars_annos.mat'} (with car_ims/), no devkit release "
                f"({root_path / DEVKIT_PARTS[0][0][0]}), and no train/ and test/ class folders under {', '.join(str(root_path / b) for b in FOLDER_BASES)}"
            )
        records = read_class_folders(base)
    return split_first_half(records).checked(SOURCE, EXPECTED)

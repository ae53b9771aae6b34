"""Oxford Flowers-102 (Nilsback & Zisserman, ICVGIP 2008, "Automated flower classification over a
large number of classes"), read from the official release (robots.ox.ac.uk/~vgg/data/flowers/102).

Layout (``root`` is the folder holding the three extracted files)::

    jpg/image_00001.jpg .. jpg/image_08189.jpg    102flowers.tgz
    imagelabels.mat                               "labels": 1 x 8189, the class (1..102) of image i
    setid.mat                                     "trnid", "valid", "tstid": 1 x n image numbers

The image numbers of ``setid.mat`` are 1-based (``image_%05d.jpg``); the release's split gives 10
training and 10 validation images per class and the remaining 6149 as the test set. The ``.mat``
files are read with :func:`scipy.io.loadmat`, which parses MATLAB arrays and runs no code. Labels
are returned 0-based (``class - 1``).

Psomas thesis §3.4.1 ("Downstream tasks") fine-tunes on "Oxford Flowers [180]" and reports top-1
on its test set (Table 3.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gspdml.errors import DataError

#: the release's parts in ``setid.mat``
PARTS = {"train": "trnid", "val": "valid", "test": "tstid"}
CLASSES = 102


@dataclass(frozen=True)
class Flowers102:
    """The release read and checked: ``paths[i]`` is image ``i + 1``, ``labels[i]`` its class
    (0-based), ``parts[name]`` the 0-based indices of a part (:data:`PARTS`)."""

    paths: tuple[Path, ...]
    labels: np.ndarray
    parts: dict[str, np.ndarray]

    def part(self, *names: str) -> tuple[list[Path], np.ndarray]:
        """The files and labels of the union of ``names`` (``train``, ``val``, ``test``), in
        image-number order."""
        index = np.sort(np.concatenate([self.parts[name] for name in names]))
        return [self.paths[i] for i in index], self.labels[index]


def _mat_vector(path: Path, field: str) -> np.ndarray:
    """The integer vector ``field`` of the MATLAB file ``path`` (a DataError naming the file and
    the field when absent or not a vector of integers)."""
    from scipy.io import loadmat

    if not path.is_file():
        raise DataError(
            f"{path}: file not found; the Oxford Flowers-102 release has it beside jpg/"
        )
    try:
        content: dict[str, Any] = loadmat(str(path))
    except (ValueError, TypeError, OSError) as error:
        raise DataError(f"{path}: not a readable MATLAB file ({error})") from None
    if field not in content:
        fields = sorted(k for k in content if not k.startswith("__"))
        raise DataError(f"{path}: no field {field!r} (fields: {fields})")
    values = np.asarray(content[field])
    if values.ndim != 2 or 1 not in values.shape or not np.issubdtype(values.dtype, np.number):
        raise DataError(f"{path}: {field!r} must be a 1 x n vector of numbers, got {values.shape}")
    flat = values.reshape(-1)
    if not np.all(flat == np.round(flat)):
        raise DataError(f"{path}: {field!r} holds non-integer values")
    return flat.astype(np.int64)


def read_flowers102(root: str | Path) -> Flowers102:
    """Read the release under ``root`` (module doc). Every image of ``imagelabels.mat`` must be a
    regular file ``jpg/image_NNNNN.jpg`` and every label a class in 1..102; the parts of
    ``setid.mat`` must be disjoint image numbers of ``imagelabels.mat``. Anything else is a
    :class:`~gspdml.errors.DataError` naming the file, the field and the value."""
    folder = Path(root).expanduser()
    labels_file, setid_file = folder / "imagelabels.mat", folder / "setid.mat"
    classes = _mat_vector(labels_file, "labels")
    if len(classes) == 0 or classes.min() < 1 or classes.max() > CLASSES:
        bad = classes[(classes < 1) | (classes > CLASSES)][:1].tolist() or "none"
        raise DataError(f"{labels_file}: 'labels' must be classes 1..{CLASSES}, got {bad}")
    paths = tuple(folder / "jpg" / f"image_{i:05d}.jpg" for i in range(1, len(classes) + 1))
    absent = [p for p in paths if not p.is_file()]
    if absent:
        raise DataError(
            f"{absent[0]}: not found ({len(absent)} of the {len(paths)} images of {labels_file} "
            "are missing); extract 102flowers.tgz into the folder holding imagelabels.mat"
        )
    parts: dict[str, np.ndarray] = {}
    for name, field in PARTS.items():
        numbers = _mat_vector(setid_file, field)
        outside = numbers[(numbers < 1) | (numbers > len(paths))]
        if len(outside):
            raise DataError(
                f"{setid_file}: {field!r} names image {int(outside[0])}, outside 1..{len(paths)}"
            )
        parts[name] = numbers - 1
    every = np.concatenate(list(parts.values()))
    if len(np.unique(every)) != len(every):
        raise DataError(f"{setid_file}: an image number appears twice in trnid, valid and tstid")
    return Flowers102(paths, classes - 1, parts)

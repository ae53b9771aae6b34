"""The revisited Oxford and Paris releases (Radenović et al., "Revisiting Oxford and Paris:
Large-Scale Image Retrieval Benchmarking", CVPR 2018), read from their official layout, by which
Psomas thesis Table 3.8 reports mAP (§3.4.3, "Image retrieval").

Layout (``root`` holds one folder per dataset, as the revisitop download script writes it)::

    roxford5k/jpg/<name>.jpg   roxford5k/gnd_roxford5k.pkl
    rparis6k/jpg/<name>.jpg    rparis6k/gnd_rparis6k.pkl

The ground-truth file is a pickled dict: ``imlist`` (the database image names, no extension),
``qimlist`` (the query image names) and ``gnd``, one dict per query with ``bbx`` (the query's
box ``[x1, y1, x2, y2]`` in pixels) and the database indices of its ``easy``, ``hard`` and
``junk`` images. It is read without running code (:func:`gspdml.data.safe_pickle.load_restricted`:
no global but numpy's array reconstruction, in case a copy stores the lists as arrays), then
checked field by field; every image file is checked to exist before anything is embedded.

A query is its image cropped to ``bbx`` (PIL's ``Image.crop``, as the official revisitop example
crops its queries); the database images are whole. The published sizes (:data:`PUBLISHED`):
ROxford5k 4,993 database images and 70 queries, RParis6k 6,322 and 70; a smaller tree in the same
layout is read too (a test fixture), and :attr:`RevisitedRelease.is_published` says which.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch
from PIL import Image

from gspdml.data.images import to_rgb
from gspdml.data.recipes import IMAGENET_MEAN, IMAGENET_STD
from gspdml.data.safe_pickle import NUMPY_ARRAYS, load_restricted
from gspdml.errors import ConfigError, DataError

#: dataset -> (published database images, published queries)
PUBLISHED = {"roxford5k": (4993, 70), "rparis6k": (6322, 70)}
#: the benchmarks' names
TITLES = {"roxford5k": "ROxford5k", "rparis6k": "RParis6k"}
#: the database labels of a query's ground truth
LABELS = ("easy", "hard", "junk")


@dataclass(frozen=True)
class RevisitedRelease:
    """One dataset as released: its ``folder``, the database and query image files, each query's
    box ``(x1, y1, x2, y2)`` and ground truth (``{"easy": [...], "hard": [...], "junk": [...]}``,
    database indices)."""

    name: str
    folder: Path
    database: tuple[Path, ...]
    queries: tuple[Path, ...]
    boxes: tuple[tuple[float, float, float, float], ...]
    ground_truth: tuple[dict[str, list[int]], ...]

    @property
    def is_published(self) -> bool:
        """Whether the counts are the published ones (:data:`PUBLISHED`)."""
        return (len(self.database), len(self.queries)) == PUBLISHED[self.name]

    def counts(self) -> dict[str, Any]:
        """The counts read beside the published ones, in the form of
        :func:`gspdml.data.benchmarks.benchmark_check` (its ``classes``: the queries), so that a
        smaller tree's numbers get no verdict."""
        images, queries = PUBLISHED[self.name]
        return {
            "benchmark": TITLES[self.name],
            "root": str(self.folder),
            "images": len(self.database),
            "classes": len(self.queries),
            "official_images": images,
            "official_classes": queries,
            "is_benchmark": self.is_published,
            "units": ["database images", "queries"],
        }


def _names(value: Any, key: str, path: Path) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise DataError(f"{path}: {key!r} must be a list of image names (strings)")
    return value


def _indices(value: Any, field: str, size: int, path: Path) -> list[int]:
    items = value.tolist() if isinstance(value, np.ndarray) else value
    if not isinstance(items, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in items
    ):
        raise DataError(f"{path}: {field} must be a list of database indices")
    outside = [i for i in items if not 0 <= i < size]
    if outside:
        raise DataError(f"{path}: {field} has indices {outside[:5]} outside the {size} images")
    return items


def _box(value: Any, field: str, path: Path) -> tuple[float, float, float, float]:
    items = value.tolist() if isinstance(value, np.ndarray) else value
    if (
        not isinstance(items, (list, tuple))
        or len(items) != 4
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
        or not (items[0] < items[2] and items[1] < items[3])
    ):
        raise DataError(f"{path}: {field} must be a box [x1, y1, x2, y2] with x1 < x2, y1 < y2")
    x1, y1, x2, y2 = (float(v) for v in items)
    return x1, y1, x2, y2


def read_ground_truth(path: Path) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """``imlist``, ``qimlist`` and ``gnd`` of a ground-truth file (module doc), checked."""
    value = load_restricted(path, "revisited Oxford/Paris ground-truth", NUMPY_ARRAYS, "latin1")
    if not isinstance(value, dict) or not {"imlist", "qimlist", "gnd"} <= set(value):
        keys = sorted(map(str, value)) if isinstance(value, dict) else type(value).__name__
        raise DataError(f"{path}: expected a dict with imlist, qimlist and gnd (got {keys})")
    database, queries = (
        _names(value["imlist"], "imlist", path),
        _names(value["qimlist"], "qimlist", path),
    )
    gnd = value["gnd"]
    if not isinstance(gnd, list) or len(gnd) != len(queries):
        raise DataError(f"{path}: gnd must hold one entry per query ({len(queries)})")
    return database, queries, gnd


def read_revisited(root: Path, name: str) -> RevisitedRelease:
    """The release ``name`` (``roxford5k`` or ``rparis6k``) under ``root`` (module doc)."""
    if name not in PUBLISHED:
        raise ConfigError("dataset", f"expected one of {list(PUBLISHED)}, got {name!r}")
    folder = Path(root) / name
    path = folder / f"gnd_{name}.pkl"
    if not path.is_file():
        raise DataError(
            f"{path}: ground-truth file not found; {folder} must hold the official release "
            f"(jpg/ and gnd_{name}.pkl, from the revisitop download script)"
        )
    database, queries, gnd = read_ground_truth(path)
    boxes, truth = [], []
    for q, entry in enumerate(gnd):
        if not isinstance(entry, dict) or "bbx" not in entry:
            raise DataError(f"{path}: gnd[{q}] must be a dict with bbx, easy, hard and junk")
        boxes.append(_box(entry["bbx"], f"gnd[{q}]['bbx']", path))
        truth.append(
            {
                label: _indices(entry.get(label, []), f"gnd[{q}][{label!r}]", len(database), path)
                for label in LABELS
            }
        )
    files = [folder / "jpg" / f"{n}.jpg" for n in (*database, *queries)]
    absent = [str(f) for f in files if not f.is_file()]
    if absent:
        raise DataError(
            f"{len(absent)} image files of {path} are missing, e.g. {absent[:3]}; the release "
            "lists every database and query image under jpg/"
        )
    return RevisitedRelease(
        name,
        folder,
        tuple(files[: len(database)]),
        tuple(files[len(database) :]),
        tuple(boxes),
        tuple(truth),
    )


class RevisitedImages(torch.utils.data.Dataset[torch.Tensor]):
    """The images of ``files`` as the evaluation embeds them, one at a time (their sizes differ):
    cropped to ``boxes`` (queries; None: whole), then shrunk so that the longer side is at most
    ``longer_side`` with the aspect ratio kept (PIL's ``thumbnail``, as DINO's
    ``eval_image_retrieval.py`` does at one scale; None: full size), ImageNet-normalised
    ``[3, H, W]``."""

    def __init__(
        self,
        files: Sequence[Path],
        boxes: Optional[Sequence[tuple[float, float, float, float]]],
        longer_side: Optional[int],
    ):
        self.files, self.boxes, self.longer_side = list(files), boxes, longer_side
        self.mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD).view(3, 1, 1)

    def __len__(self) -> int:
        return len(self.files)

    def image(self, index: int) -> Image.Image:
        """The RGB image of ``index`` after the crop and the resize. The stored pixels, as
        revisitop reads them: an EXIF orientation is not applied (the boxes are in the stored
        pixels' coordinates)."""
        path = self.files[index]
        try:
            with Image.open(path) as opened:
                image = to_rgb(opened)
                image.load()
        except (OSError, ValueError, Image.DecompressionBombError) as error:
            raise DataError(f"{path}: cannot decode image ({error})") from None
        if self.boxes is not None:
            image = image.crop(self.boxes[index])
        if self.longer_side is not None:
            image.thumbnail((self.longer_side, self.longer_side), Image.Resampling.LANCZOS)
        return image

    def __getitem__(self, index: int) -> torch.Tensor:
        pixels = np.asarray(self.image(index), dtype=np.float32) / 255.0
        tensor = torch.from_numpy(pixels).permute(2, 0, 1)
        return (tensor - self.mean) / self.std

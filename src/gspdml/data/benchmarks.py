"""Whether a dataset folder is the published benchmark: the image and class counts of the four
DML benchmarks as published with them (the same totals the readers of :mod:`gspdml.data.cub`,
:mod:`~gspdml.data.cars`, :mod:`~gspdml.data.sop` and :mod:`~gspdml.data.inshop` check their
splits against), beside the counts of what a reader lists under a folder.

The readers accept a smaller tree in the same layout (a test fixture, a subset for a smoke run),
so a number trained on one is not a number of the benchmark; ``gspdml reproduce`` gives such a
row no verdict and names the difference (:func:`benchmark_check`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from gspdml.data.base import spec_options
from gspdml.data.cars import read_cars
from gspdml.data.cub import read_cub
from gspdml.data.image_splits import OfficialSplits
from gspdml.data.inshop import read_inshop
from gspdml.data.sop import read_sop


@dataclass(frozen=True)
class Benchmark:
    """A benchmark's published counts and the reader of its official layout."""

    source: str
    images: int
    classes: int
    reader: Callable[[str], OfficialSplits]


CUB = Benchmark("CUB-200-2011", 11788, 200, read_cub)
CARS = Benchmark("Cars196", 16185, 196, read_cars)
SOP = Benchmark("Stanford Online Products", 120053, 22634, read_sop)
INSHOP = Benchmark("In-Shop", 52712, 7982, read_inshop)
#: dataset names (and aliases) of ``data.dataset.name`` that read a benchmark
BENCHMARKS = {
    "cub200": CUB,
    "cub": CUB,
    "cars196": CARS,
    "cars": CARS,
    "sop": SOP,
    "stanford_online_products": SOP,
    "inshop": INSHOP,
    "in_shop": INSHOP,
}


@dataclass(frozen=True)
class DatasetFolder:
    """The reader and folder a ``data.dataset`` spec names (its ``name`` and ``root``)."""

    name: str = ""
    root: Optional[str] = None


def benchmark_check(dataset: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The counts of the folder a ``data.dataset`` spec reads, beside the published ones:
    ``{"benchmark", "root", "images", "classes", "official_images", "official_classes",
    "is_benchmark"}``; None for a dataset that is not one of the four benchmarks."""
    folder = spec_options(DatasetFolder, dataset)
    bench = BENCHMARKS.get(str(folder.name))
    if bench is None or folder.root is None:
        return None
    splits = bench.reader(str(folder.root))
    images = sum(len(p) for p in splits.parts)
    classes = len(np.unique(np.concatenate([p.labels for p in splits.parts])))
    return {
        "benchmark": bench.source,
        "root": str(folder.root),
        "images": images,
        "classes": classes,
        "official_images": bench.images,
        "official_classes": bench.classes,
        "is_benchmark": images == bench.images and classes == bench.classes,
    }


def describe_check(check: Mapping[str, Any]) -> str:
    """ "/data/cub: 512 images of 10 classes, not CUB-200-2011 (11,788 images, 200 classes)";
    ``units`` (optional): what ``images`` and ``classes`` count, e.g. ``("database images",
    "queries")`` for a retrieval benchmark (:meth:`gspdml.data.revisited.RevisitedRelease.counts`)."""
    what = "is" if check["is_benchmark"] else "not"
    images, classes = check.get("units", ("images", "classes"))
    join = "of" if classes == "classes" else "and"
    return (
        f"{check['root']}: {check['images']:,} {images} {join} {check['classes']:,} {classes}, "
        f"{what} {check['benchmark']} ({check['official_images']:,} {images}, "
        f"{check['official_classes']:,} {classes})"
    )

"""The generic composed-image-retrieval benchmarks of the Psomas thesis Table 4.7 (§4.4.8):
Fashion-IQ, CIRR and CIRCO, read from their official release layouts (JSON only, nothing
pickled), as :class:`GenericProtocol` s with their official metrics' inputs.

* ``fashioniq`` — Fashion-IQ (Wu et al., CVPR 2021), a folder with ``captions/cap.<category>.
  <split>.json`` (a list of ``{"candidate", "target", "captions": [two sentences]}``),
  ``image_splits/split.<category>.<split>.json`` (a list of image names) and ``images/<name>``
  (``.png``, ``.jpg`` or ``.jpeg``), for the categories dress, shirt and toptee. Each category's
  queries rank that category's split (its gallery); the query text is the two captions joined
  by " and ". Official metrics: Recall@10 and @50 per category and their mean.
* ``cirr`` — CIRR (Liu et al., ICCV 2021), the repository folder with ``cirr/captions/cap.rc2.
  <split>.json`` (a list of ``{"pairid", "reference", "target_hard", "caption", "img_set":
  {"members": [6 names]}}``), ``cirr/image_splits/split.rc2.<split>.json`` (``{name: relative
  path}``, relative to the folder, e.g. ``./dev/0/dev-0-0-img0.png``) and the image folders.
  The reference image is removed from the ranking (the official evaluation does so). Official
  metrics: Recall@1, 5, 10, 50 and Recall_subset@1, 2, 3 (the target among the query's image
  set, reference removed).
* ``circo`` — CIRCO (Baldrati et al., ICCV 2023), a folder with ``annotations/<split>.json`` (a
  list of ``{"id", "reference_img_id", "target_img_id", "relative_caption", "shared_concept",
  "gt_img_ids"}``) and the COCO 2017 unlabeled images ``COCO2017_unlabeled/unlabeled2017/`` with
  their index ``COCO2017_unlabeled/annotations/image_info_unlabeled2017.json`` (``{"images":
  [{"id", "file_name"}]}``); every indexed image is the database, each query has all its
  ``gt_img_ids`` as positives. Official metric: mAP@5, 10, 25, 50.

The thesis evaluates on the validation splits (CIRR and CIRCO: their test sets are behind
evaluation servers, §4.4.8), so ``split`` defaults to ``val``. The table's own number is mAP
over the whole ranking (§4.4.1), one group per Fashion-IQ category (mean over the three), one
group for CIRR and for CIRCO. A file that is not the official layout is refused naming the file,
the entry and the field.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gspdml.errors import ConfigError, DataError

from .composition_protocol import CompositionProtocol, CompositionQuery

FASHIONIQ_CATEGORIES = ("dress", "shirt", "toptee")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


@dataclass
class GenericQuery(CompositionQuery):
    """A composed query of a generic benchmark: besides its positives, the database indices
    that are not ranked (``excluded``: CIRR's reference image, the other Fashion-IQ
    categories' galleries) and CIRR's image set (``subset``: database indices of its members,
    the reference removed; empty elsewhere)."""

    excluded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    subset: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class GenericProtocol(CompositionProtocol):
    """The protocol of one generic benchmark (``benchmark``: a key of :data:`GENERIC_BENCHMARKS`);
    its ``queries`` are :class:`GenericQuery` s."""

    benchmark: str = ""


@dataclass(frozen=True)
class GenericBenchmark:
    """A generic benchmark: its folder under the data folder, its reader and the cut-offs of
    its official metrics (Recall@K, CIRR's Recall_subset@K, CIRCO's mAP@K)."""

    name: str
    title: str
    folder: str
    read: Callable[[Path, str], GenericProtocol]
    recall_at: tuple[int, ...] = ()
    recall_subset_at: tuple[int, ...] = ()
    map_at: tuple[int, ...] = ()


def _load(path: Path) -> Any:
    """The JSON value of one release file, or a :class:`DataError` naming it."""
    if not path.is_file():
        raise DataError(f"{path}: file not found (the benchmark's official release layout)")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise DataError(
            f"{path}: not a readable JSON file ({type(error).__name__}: {error})"
        ) from None


def _list_of_objects(path: Path, value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise DataError(f"{path}: expected a JSON list of objects, got {type(value).__name__}")
    if not value:
        raise DataError(f"{path}: the list is empty")
    return value


KINDS = {str: "a non-empty string", int: "an integer", list: "a list", dict: "an object"}


def _field(path: Path, number: int, entry: dict[str, Any], name: str, kind: type) -> Any:
    """``entry[name]``, checked to be a ``kind`` (a non-empty string for ``str``)."""
    value: Any = entry.get(name)
    if kind is int and isinstance(value, bool):
        value = None
    if not isinstance(value, kind) or (isinstance(value, str) and not value.strip()):
        raise DataError(
            f"{path}: entry {number}: field {name!r} must be {KINDS[kind]}, got {value!r}"
        )
    return value


def _unknown(path: Path, number: int, name: str, value: Any, where: str) -> DataError:
    return DataError(f"{path}: entry {number}: field {name!r}: {value!r} is not in {where}")


def _under(folder: Path, relative: str, where: str) -> Path:
    """``folder / relative`` for a path a release file names; one that leaves ``folder``
    (absolute, or through ``..``) is refused, naming the file and field (``where``)."""
    parts = Path(relative).parts
    if Path(relative).is_absolute() or ".." in parts or not parts:
        raise DataError(f"{where}: {relative!r} is not a path inside {folder}")
    return folder / relative


def _image_file(folder: Path, name: str, where: str) -> Path:
    _under(folder, name, where)
    for suffix in IMAGE_SUFFIXES:
        candidate = folder / f"{name}{suffix}"
        if candidate.is_file():
            return candidate
    raise DataError(
        f"{folder}: no image {name!r} ({', '.join(IMAGE_SUFFIXES)}), listed in the image splits"
    )


def read_fashioniq(root: Path, split: str = "val") -> GenericProtocol:
    """Fashion-IQ's ``split`` (module docstring): one group per category."""
    database: list[str] = []
    galleries: dict[str, np.ndarray] = {}
    index: dict[str, dict[str, int]] = {}
    for category in FASHIONIQ_CATEGORIES:
        path = root / "image_splits" / f"split.{category}.{split}.json"
        names = _load(path)
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise DataError(f"{path}: expected a non-empty JSON list of image names")
        start = len(database)
        database += [str(_image_file(root / "images", n, str(path)).resolve()) for n in names]
        index[category] = {n: start + i for i, n in enumerate(names)}
        galleries[category] = np.arange(start, len(database))
    everything = np.arange(len(database))
    protocol = GenericProtocol(database, [], benchmark="fashioniq")
    position: dict[str, int] = {}
    for category in FASHIONIQ_CATEGORIES:
        path = root / "captions" / f"cap.{category}.{split}.json"
        excluded = np.setdiff1d(everything, galleries[category])
        for number, entry in enumerate(_list_of_objects(path, _load(path))):
            names = {k: _field(path, number, entry, k, str) for k in ("candidate", "target")}
            captions = _field(path, number, entry, "captions", list)
            if len(captions) != 2 or not all(isinstance(c, str) for c in captions):
                raise DataError(
                    f"{path}: entry {number}: field 'captions' must be a list of two "
                    f"sentences, got {captions!r}"
                )
            for key, name in names.items():
                if name not in index[category]:
                    raise _unknown(path, number, key, name, f"split.{category}.{split}.json")
            reference = database[index[category][names["candidate"]]]
            image = position.setdefault(reference, len(position))
            text = " and ".join(c.strip().rstrip(".") for c in captions)
            target = np.array([index[category][names["target"]]])
            protocol.queries.append(GenericQuery(image, text, target, category, excluded))
    protocol.query_images = list(position)
    return protocol


def read_cirr(root: Path, split: str = "val") -> GenericProtocol:
    """CIRR's ``split`` (module docstring; the release names the validation split ``val``)."""
    splits = root / "cirr" / "image_splits" / f"split.rc2.{split}.json"
    paths = _load(splits)
    if not isinstance(paths, dict) or not paths:
        raise DataError(f"{splits}: expected a non-empty JSON object {{image name: path}}")
    database = []
    for name, relative in paths.items():
        where = f"{splits}: image {name!r}"
        if not isinstance(relative, str) or not _under(root, relative, where).is_file():
            raise DataError(f"{where}: {relative!r} is not a file under {root}")
        database.append(str((root / relative).resolve()))
    index = {name: i for i, name in enumerate(paths)}
    captions = root / "cirr" / "captions" / f"cap.rc2.{split}.json"
    protocol = GenericProtocol(database, [], benchmark="cirr")
    position: dict[str, int] = {}
    for number, entry in enumerate(_list_of_objects(captions, _load(captions))):
        names = {k: _field(captions, number, entry, k, str) for k in ("reference", "target_hard")}
        text = _field(captions, number, entry, "caption", str).strip()
        members = _field(captions, number, entry, "img_set", dict).get("members")
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise DataError(
                f"{captions}: entry {number}: field 'img_set.members' must be a list of image "
                f"names, got {members!r}"
            )
        for key, name in [*names.items(), *(("img_set.members", m) for m in members)]:
            if name not in index:
                raise _unknown(captions, number, key, name, splits.name)
        reference = index[names["reference"]]
        subset = np.array([index[m] for m in members if index[m] != reference], dtype=np.int64)
        image = position.setdefault(database[reference], len(position))
        target = np.array([index[names["target_hard"]]])
        protocol.queries.append(
            GenericQuery(image, text, target, "cirr", np.array([reference]), subset)
        )
    protocol.query_images = list(position)
    return protocol


def read_circo(root: Path, split: str = "val") -> GenericProtocol:
    """CIRCO's ``split`` over the COCO 2017 unlabeled images (module docstring)."""
    coco = root / "COCO2017_unlabeled"
    info = coco / "annotations" / "image_info_unlabeled2017.json"
    images = _load(info)
    listed = images.get("images") if isinstance(images, dict) else None
    if not isinstance(listed, list) or not listed:
        raise DataError(f"{info}: expected an object with a non-empty list 'images'")
    database: list[str] = []
    index: dict[int, int] = {}
    for number, entry in enumerate(_list_of_objects(info, listed)):
        identifier = _field(info, number, entry, "id", int)
        name = _field(info, number, entry, "file_name", str)
        file = _under(coco / "unlabeled2017", name, f"{info}: entry {number}: field 'file_name'")
        if not file.is_file():
            raise DataError(f"{info}: entry {number}: field 'file_name': {file} does not exist")
        index[identifier] = len(database)
        database.append(str(file.resolve()))
    annotations = root / "annotations" / f"{split}.json"
    protocol = GenericProtocol(database, [], benchmark="circo")
    position: dict[str, int] = {}
    for number, entry in enumerate(_list_of_objects(annotations, _load(annotations))):
        reference = _field(annotations, number, entry, "reference_img_id", int)
        target = _field(annotations, number, entry, "target_img_id", int)
        text = _field(annotations, number, entry, "relative_caption", str).strip()
        _field(annotations, number, entry, "shared_concept", str)
        truth = _field(annotations, number, entry, "gt_img_ids", list)
        if target not in truth or not all(isinstance(t, int) for t in truth):
            raise DataError(
                f"{annotations}: entry {number}: field 'gt_img_ids' must be a list of image ids "
                f"holding target_img_id {target}, got {truth!r}"
            )
        for key, identifier in [
            ("reference_img_id", reference),
            *(("gt_img_ids", t) for t in truth),
        ]:
            if identifier not in index:
                raise _unknown(annotations, number, key, identifier, info.name)
        image = position.setdefault(database[index[reference]], len(position))
        positives = np.array(sorted({index[t] for t in truth}), dtype=np.int64)
        protocol.queries.append(GenericQuery(image, text, positives, "circo"))
    protocol.query_images = list(position)
    return protocol


GENERIC_BENCHMARKS = {
    benchmark.name: benchmark
    for benchmark in (
        GenericBenchmark("fashioniq", "Fashion-IQ", "FashionIQ", read_fashioniq, (10, 50)),
        GenericBenchmark("cirr", "CIRR", "CIRR", read_cirr, (1, 5, 10, 50), (1, 2, 3)),
        GenericBenchmark("circo", "CIRCO", "CIRCO", read_circo, map_at=(5, 10, 25, 50)),
    )
}


def get_generic_benchmark(name: str) -> GenericBenchmark:
    if name not in GENERIC_BENCHMARKS:
        raise ConfigError(
            "dataset",
            f"unknown generic benchmark {name!r}; choose one of {', '.join(GENERIC_BENCHMARKS)}",
        )
    return GENERIC_BENCHMARKS[name]


def generic_protocol(name: str, data_root: str | Path, split: str = "val") -> GenericProtocol:
    """The protocol of benchmark ``name`` in ``<data_root>/<its folder>`` (``FashionIQ``,
    ``CIRR``, ``CIRCO``)."""
    benchmark = get_generic_benchmark(name)
    folder = Path(data_root).expanduser().resolve() / benchmark.folder
    if not folder.is_dir():
        raise DataError(
            f"{folder} does not exist: the data folder must hold {benchmark.folder}/ in the "
            f"official {benchmark.title} release layout"
        )
    return benchmark.read(folder, split)


def official_metric_names(name: str) -> Sequence[str]:
    """The official metrics of benchmark ``name``, as the result keys of
    :func:`~gspdml.cir.generic_metrics.evaluate_generic`."""
    benchmark = get_generic_benchmark(name)
    return (
        *(f"recall@{k}" for k in benchmark.recall_at),
        *(f"recall_subset@{k}" for k in benchmark.recall_subset_at),
        *(f"map@{k}" for k in benchmark.map_at),
    )

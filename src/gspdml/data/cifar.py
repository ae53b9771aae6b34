"""CIFAR-10 and CIFAR-100 (Krizhevsky 2009, "Learning Multiple Layers of Features from Tiny
Images"), read from the official "python version" archives.

Layout (``root`` is the extracted folder or the folder holding it)::

    cifar-10-batches-py/  data_batch_1 .. data_batch_5, test_batch, batches.meta
    cifar-100-python/     train, test, meta

Each file is a pickled dict with bytes keys: ``b'data'`` (uint8 ``[N, 3072]``, the 1024 red,
then green, then blue values of a 32×32 image, row-major), ``b'labels'`` (CIFAR-10) or
``b'fine_labels'`` and ``b'coarse_labels'`` (CIFAR-100), ``b'filenames'``; the meta files hold
``b'label_names'`` or ``b'fine_label_names'`` and ``b'coarse_label_names'``.

Pickles can run code when loaded, and no file a user receives may do that: :func:`read_pickle`
admits only the few numpy constructors an array needs (no other global), then checks that what it
read is plain data (dicts, lists, bytes, str, int and uint8/int arrays); anything else is a
:class:`~gspdml.errors.DataError` naming the file.

``cifar10`` and ``cifar100`` keep the official train/test split (the same classes on both sides:
the classification split of the GSP paper's zero-shot attribute study, supplement §2.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gspdml.data.arrays import ArrayDataset, counted_pixel_statistics
from gspdml.data.base import DATASETS, DataSplits, EvalSplit
from gspdml.data.safe_pickle import NUMPY_ARRAYS, load_restricted
from gspdml.errors import ConfigError, DataError
from gspdml.registry import supplied_by_caller

FOLDERS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
FILES = {
    "cifar10": ([f"data_batch_{i}" for i in range(1, 6)], ["test_batch"], "batches.meta"),
    "cifar100": (["train"], ["test"], "meta"),
}
#: the only globals a CIFAR pickle needs: numpy's array and dtype reconstruction, and
#: ``_codecs.encode``, with which Python 3 writes bytes in protocol 2
ALLOWED_GLOBALS = NUMPY_ARRAYS | {("_codecs", "encode")}
SIDE = 32


def _plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, (bytes, str)) and _plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "ui"
    return isinstance(value, (bytes, str, int)) and not isinstance(value, bool)


def read_pickle(path: Path) -> dict[bytes, Any]:
    """The dict of a CIFAR pickle, read without running code (module docstring)."""
    value = load_restricted(path, "CIFAR", ALLOWED_GLOBALS, encoding="bytes")
    if not isinstance(value, dict) or not _plain(value):
        raise DataError(
            f"{path}: expected a dict of bytes keys to lists, bytes, ints and integer arrays"
        )
    return {k.encode() if isinstance(k, str) else k: v for k, v in value.items()}


def _field(batch: dict[bytes, Any], key: str, path: Path) -> Any:
    if key.encode() not in batch:
        raise DataError(f"{path}: no {key!r} entry (has {sorted(k.decode() for k in batch)})")
    return batch[key.encode()]


def read_batch(path: Path, label_keys: tuple[str, ...]) -> tuple[np.ndarray, list[np.ndarray]]:
    """Images uint8 ``[N, 3, 32, 32]`` and the ``label_keys`` label arrays of one data file."""
    batch = read_pickle(path)
    data = _field(batch, "data", path)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2:
        raise DataError(
            f"{path}: 'data' must be a uint8 [N, 3072] array, got {type(data).__name__}"
        )
    if data.shape[1] != 3 * SIDE * SIDE:
        raise DataError(f"{path}: 'data' rows have {data.shape[1]} values, expected 3072")
    labels = []
    for key in label_keys:
        values = np.asarray(_field(batch, key, path))
        if values.shape != (len(data),) or values.dtype.kind not in "ui":
            raise DataError(
                f"{path}: {key!r} must hold {len(data)} integer labels, got shape {values.shape}"
            )
        labels.append(values.astype(np.int64))
    return data.reshape(-1, 3, SIDE, SIDE), labels


def _names(meta: dict[bytes, Any], key: str, count: int, path: Path) -> list[str]:
    names = _field(meta, key, path)
    if not isinstance(names, list) or len(names) != count:
        raise DataError(f"{path}: {key!r} must list {count} class names")
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


def cifar_content(name: str, root: Optional[str]) -> list[str]:
    """The content hashes of the files :func:`load_cifar` reads for ``name``: what a cache of
    arrays built from them is keyed by, never their folder (a replaced file gets another key)."""
    from gspdml.file_digest import file_sha256

    folder = find_folder(name, root)
    train, test, meta = FILES[name]
    return [file_sha256(folder / file) for file in (*train, *test, meta)]


def find_folder(name: str, root: Optional[str]) -> Path:
    """The extracted folder of ``name`` (``cifar10``/``cifar100``): ``root`` or ``root/<folder>``."""
    if root is None:
        raise ConfigError(
            "data.dataset.root",
            f"{name} needs root: the folder holding {FOLDERS[name]}/ (the python version from "
            "https://www.cs.toronto.edu/~kriz/cifar.html, extracted)",
        )
    base = Path(root).expanduser()
    for folder in (base / FOLDERS[name], base):
        if (folder / FILES[name][2]).is_file():
            return folder
    raise DataError(
        f"{base}: no {FOLDERS[name]}/{FILES[name][2]} (extract the python version there)"
    )


def cifar100_names(folder: Path) -> tuple[list[str], list[str]]:
    """The 100 fine and 20 coarse class names of the CIFAR-100 ``folder`` (its meta file)."""
    meta = read_pickle(folder / FILES["cifar100"][2])
    return (
        _names(meta, "fine_label_names", 100, folder / "meta"),
        _names(meta, "coarse_label_names", 20, folder / "meta"),
    )


@dataclass(frozen=True)
class CifarImages:
    """One CIFAR dataset: uint8 images ``[N, 3, 32, 32]`` and labels per official part, class
    names; ``coarse`` labels and ``coarse_names`` for CIFAR-100 (its 20 super-classes)."""

    train: np.ndarray
    train_labels: np.ndarray
    test: np.ndarray
    test_labels: np.ndarray
    names: list[str]
    train_coarse: Optional[np.ndarray] = None
    test_coarse: Optional[np.ndarray] = None
    coarse_names: Optional[list[str]] = None


def load_cifar(name: str, root: Optional[str]) -> CifarImages:
    """Read CIFAR-10 (``name="cifar10"``) or CIFAR-100 (``"cifar100"``) from ``root``."""
    folder = find_folder(name, root)
    train_files, test_files, meta_file = FILES[name]
    fine = name == "cifar100"
    keys = ("fine_labels", "coarse_labels") if fine else ("labels",)
    meta = read_pickle(folder / meta_file)
    names = _names(
        meta, "fine_label_names" if fine else "label_names", 100 if fine else 10, folder / meta_file
    )
    parts = []
    for files in (train_files, test_files):
        batches = [read_batch(folder / f, keys) for f in files]
        images = np.concatenate([b[0] for b in batches])
        labels = [np.concatenate([b[1][k] for b in batches]) for k in range(len(keys))]
        for key, values, count in zip(keys, labels, (len(names), 20)):
            if len(values) and (values.min() < 0 or values.max() >= count):
                raise DataError(f"{folder / files[0]}: {key!r} outside 0..{count - 1}")
        parts.append((images, labels))
    (train, train_labels), (test, test_labels) = parts
    coarse = (
        (
            train_labels[1],
            test_labels[1],
            _names(meta, "coarse_label_names", 20, folder / meta_file),
        )
        if fine
        else (None, None, None)
    )
    return CifarImages(train, train_labels[0], test, test_labels[0], names, *coarse)


def _per_class(
    labels: np.ndarray, limit: Optional[int], held_out: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Indices, in file order, of the first ``limit`` items of each class (all when None) after
    holding out each class's last ``held_out`` items, and of the held-out items."""
    kept, held = [], []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        if held_out >= len(members):
            raise ConfigError(
                "data.dataset.val_images_per_class",
                f"class {c} has {len(members)} training images; hold out fewer than that",
            )
        cut = len(members) - held_out
        kept.append(members[:cut][:limit])
        held.append(members[cut:])
    return np.sort(np.concatenate(kept)), np.sort(np.concatenate(held))


def official_split(name: str) -> Any:
    def factory(
        seed: int = 0,
        root: Optional[str] = None,
        images_per_class: Optional[int] = None,
        test_images_per_class: Optional[int] = None,
        val_images_per_class: int = 0,
    ) -> DataSplits:
        """The official training and test files (the same classes on both sides; evaluated
        leave-one-out; the validation split, for model selection, has the same classes again).

        Args:
            root: the folder of the CIFAR python files (null: the data folder's default).
            images_per_class: keep the first so many training images of each class (null: all).
            test_images_per_class: keep the first so many test images of each class (null: all).
            val_images_per_class: hold out the last so many training images of each class as a
                validation split.
        """
        data = load_cifar(name, root)
        train, val = _per_class(data.train_labels, images_per_class, int(val_images_per_class))
        test, _ = _per_class(data.test_labels, test_images_per_class)
        mean, std = counted_pixel_statistics(data.train[train])

        def part(images: np.ndarray, labels: np.ndarray) -> ArrayDataset:
            return ArrayDataset(images, labels, mean, std, data.names)

        return DataSplits(
            train=part(data.train[train], data.train_labels[train]),
            val=EvalSplit(part(data.train[val], data.train_labels[val])) if len(val) else None,
            test=EvalSplit(part(data.test[test], data.test_labels[test])),
        )

    factory.__name__ = factory.__qualname__ = name
    return supplied_by_caller("seed")(factory)


cifar10 = DATASETS.register("cifar10")(official_split("cifar10"))
cifar100 = DATASETS.register("cifar100")(official_split("cifar100"))

"""The memory a torch checkpoint (``.pth``, ``.pt``) may ask for, checked before ``torch.load``
reads it: a received file can ask for far more memory than its size (issue 39).

A torch zip checkpoint holds a pickle (``<archive>/data.pkl``) declaring each storage (key,
element type, element count) and each tensor (a view: offset, size, strides), and one record
per storage (``<archive>/data/<key>``). Before any record is inflated:

* **the archive**: the inflated records add up to at most :data:`INFLATION` times the file's
  size plus :data:`SLACK` bytes (a 2 MB zip bomb is refused from its directory);
* **the storages**: each record holds exactly the bytes its declared element count needs;
* **the tensors**: each view fits its storage (``offset + sum((size_i - 1) * stride_i) <`` the
  storage's elements) and has no more elements than it (a stride-0 view of one number that
  claims 51.5 GB would be materialised by the first reshape).

Then, the records' sizes known to be bounded, each record's CRC-32 is checked: ``torch.load``
checks none, so a damaged record (a bit flipped in a copy) would load as other numbers.

The pickle is read by an unpickler that builds nothing (every global but the rebuild functions
is an inert placeholder), so no code of the file runs. A legacy (non-zip) checkpoint's storages
are checked against the file's size. Any failure is a :class:`~gspdml.errors.DataError` naming
the file and what it asks for.
"""

from __future__ import annotations

import collections
import math
import os
import pickle
import warnings
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import torch

from gspdml.errors import DataError

#: records may inflate to this many times the file's size (torch.save stores them uncompressed)
INFLATION = 2
#: plus this many bytes (the small records: data.pkl, version, byteorder)
SLACK = 1 << 20
#: the tensor rebuild functions of torch's pickles
_REBUILDERS = {"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3"}
_FIX = "it is not a checkpoint torch.save wrote; refused before reading it"


def check_torch_checkpoint(path: str | os.PathLike[str]) -> None:
    """Raise a :class:`DataError` naming ``path`` when the checkpoint asks for more memory than
    its records hold (module docstring); return when it does not."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        _check_zip(path)
    else:
        with open(path, "rb") as handle:
            _check_legacy(path, handle)


def _check_zip(path: Path) -> None:
    disk = path.stat().st_size
    with zipfile.ZipFile(path) as archive:
        records = {info.filename: info for info in archive.infolist()}
        inflated = sum(info.file_size for info in records.values())
        if inflated > INFLATION * disk + SLACK:
            largest = max(records.values(), key=lambda info: info.file_size)
            raise DataError(
                f"{path}: its records inflate to {inflated} bytes from a {disk}-byte file "
                f"({largest.filename}: {largest.file_size} bytes from {largest.compress_size}); "
                f"a zip bomb? {_FIX}"
            )
        pickles = [name for name in records if name.endswith("/data.pkl") or name == "data.pkl"]
        if len(pickles) != 1:
            raise DataError(f"{path}: expected one data.pkl record, found {len(pickles)}; {_FIX}")
        root = pickles[0][: -len("data.pkl")]
        with archive.open(pickles[0]) as handle:
            declared = _declarations(path, handle)
        for key, storage in declared.storages.items():
            record = records.get(f"{root}data/{key}")
            stored = -1 if record is None else record.file_size
            if stored != storage.nbytes:
                raise DataError(
                    f"{path}: storage {key!r} declares {storage.numel} elements "
                    f"({storage.nbytes} bytes), its record holds {max(stored, 0)} bytes; {_FIX}"
                )
        _check_views(path, declared)
        _check_crc(path, archive)


def _check_crc(path: Path, archive: zipfile.ZipFile) -> None:
    """Every record's CRC-32 in ``archive`` (the zip of ``path``, already open: ``torch.load``
    checks none, so a flipped bit in a weight would load as another number); read after the
    sizes are known to be bounded."""
    try:
        damaged = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as error:
        damaged = f"? ({type(error).__name__}: {error})"
    if damaged is not None:
        raise DataError(
            f"{path}: record {damaged} does not match its CRC-32: the file is damaged "
            "(a partial download or copy); fetch it again"
        )


def _check_legacy(path: Path, handle: IO[bytes]) -> None:
    """torch's format before 1.6: four pickles (magic number, protocol, system info, the
    object), then the storages' raw bytes."""
    try:
        for _ in range(3):
            _Declarations.read(handle)
    except Exception:  # noqa: BLE001 - not torch's legacy format either: torch.load refuses it
        return
    declared = _declarations(path, handle)
    total = sum(storage.nbytes for storage in declared.storages.values())
    size = path.stat().st_size
    if total > size:
        raise DataError(
            f"{path}: its storages declare {total} bytes, more than the {size}-byte file holds; "
            f"{_FIX}"
        )
    _check_views(path, declared)


@dataclass(frozen=True)
class _Storage:
    key: str
    numel: int
    element_size: int

    @property
    def nbytes(self) -> int:
        return self.numel * self.element_size


@dataclass(frozen=True)
class _View:
    storage: _Storage
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]
    element_size: int


@dataclass
class _Declarations:
    storages: dict[str, _Storage] = field(default_factory=dict)
    views: list[_View] = field(default_factory=list)

    @staticmethod
    def read(handle: IO[bytes]) -> _Declarations:
        declared = _Declarations()
        _Unpickler(handle, declared).load()
        return declared


def _declarations(path: Path, handle: IO[bytes]) -> _Declarations:
    try:
        return _Declarations.read(handle)
    except DataError as error:
        raise DataError(f"{path}: {error}; {_FIX}") from None
    except Exception as error:  # noqa: BLE001 - a pickle this reader cannot follow
        raise DataError(
            f"{path}: its pickle cannot be read ({type(error).__name__}: {error}); {_FIX}"
        ) from None


def _check_views(path: Path, declared: _Declarations) -> None:
    for view in declared.views:
        elements = view.storage.nbytes // view.element_size
        count = math.prod(view.size)
        if count == 0:
            continue
        extent = view.offset + sum((n - 1) * s for n, s in zip(view.size, view.stride)) + 1
        if extent > elements or count > elements:
            raise DataError(
                f"{path}: a tensor of shape {list(view.size)} (strides {list(view.stride)}) "
                f"claims {count} elements ({count * view.element_size} bytes) on storage "
                f"{view.storage.key!r} of {elements}; {_FIX}"
            )


class _Inert:
    """What every global of the pickle but torch's rebuild functions becomes: it takes any
    arguments and state and does nothing."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> _Inert:
        return _Inert()

    def __setstate__(self, state: Any) -> None:
        pass

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def append(self, value: Any) -> None:
        pass

    def extend(self, values: Any) -> None:
        pass


def _element_size(kind: Any) -> int:
    """Bytes per element of a storage class (``torch.FloatStorage``) or a dtype."""
    if kind is torch.UntypedStorage:
        return 1
    with warnings.catch_warnings():  # a typed storage class's dtype warns that it is legacy
        warnings.simplefilter("ignore", UserWarning)
        dtype = kind if isinstance(kind, torch.dtype) else getattr(kind, "dtype", None)
    if not isinstance(dtype, torch.dtype):
        raise DataError(f"unknown storage type {kind!r}")
    return dtype.itemsize


def _whole(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DataError(f"{what} {value!r} is not a count")
    return value


class _Unpickler(pickle.Unpickler):
    """Reads the declarations of a torch pickle without building anything (module docstring)."""

    def __init__(self, handle: IO[bytes], declared: _Declarations):
        super().__init__(handle)
        self.declared = declared

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch._utils" and name in _REBUILDERS:
            return self._rebuild
        found = getattr(torch, name, None) if module == "torch" else None
        if isinstance(found, torch.dtype) or (isinstance(found, type) and name.endswith("Storage")):
            return found  # a dtype or a storage class: what the declarations are counted in
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        return _Inert

    def persistent_load(self, pid: Any) -> Any:
        # ("storage", type, key, location, numel), and a view's metadata in the legacy format
        if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage"):
            raise DataError(f"unknown persistent record {str(pid)[:80]}")
        kind, key, numel = pid[1], pid[2], pid[4]
        storage = _Storage(str(key), _whole(numel, "storage size"), _element_size(kind))
        self.declared.storages.setdefault(storage.key, storage)
        return storage

    def _rebuild(self, storage: Any, offset: Any, size: Any, stride: Any, *rest: Any) -> _Inert:
        if not isinstance(storage, _Storage):
            raise DataError("a tensor whose storage is not a record")
        if not isinstance(size, tuple) or not isinstance(stride, tuple) or len(size) != len(stride):
            raise DataError(f"a tensor of size {size!r} and strides {stride!r}")
        dtype = rest[2] if len(rest) >= 3 and isinstance(rest[2], torch.dtype) else None
        self.declared.views.append(
            _View(
                storage,
                _whole(offset, "storage offset"),
                tuple(_whole(n, "size") for n in size),
                tuple(_whole(s, "stride") for s in stride),
                storage.element_size if dtype is None else dtype.itemsize,
            )
        )
        return _Inert()

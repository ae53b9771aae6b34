"""Writing output files so that a crash, a kill or a full disk never leaves a damaged one.

* :func:`check_writable_folder` / :func:`check_writable_file`: before the work, create the
  folder and write a probe of :data:`PROBE_BYTES` in it, so that a read-only target, a path under
  a file or a full disk fails at once with a message naming the path;
* :func:`atomic_write`: the file is written under a hidden temporary name beside its target
  (``.NAME.<random>.tmp``), flushed to disk (``fsync``) and renamed over the target
  (``os.replace`` is atomic on POSIX and Windows), then the folder entry is flushed too. A
  failure (``ENOSPC``, ``EFBIG``, permissions) removes the temporary file and raises
  :class:`OutputError` naming the target; the previous file is untouched. A process killed
  while writing leaves only the temporary file, which :func:`remove_stale_temporaries` removes
  (the writer of a folder calls it while it holds the folder's lock);
* :func:`replace_folder`: a folder built beside its target takes the target's place; the
  previous folder is moved aside first and removed only once the new one is in place;
* :func:`json_text`: the JSON every file and printout is written as, valid for any parser
  (RFC 8259 has no NaN or Infinity token: a non-finite number is written as ``null``).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Union

from gspdml.errors import GspdmlError

PathLike = Union[str, Path]
PROBE_BYTES = 64 * 1024  # written by the output check: a full disk fails it
TEMP_SUFFIX = ".tmp"
#: the errors of a full disk, a quota, or a file-size limit
DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
# the name tempfile.mkstemp gives: prefix ".NAME.", eight random characters, the suffix
_TEMPORARY = re.compile(r"^\..+\.[a-z0-9_]{8}\.tmp$")


class OutputError(GspdmlError, OSError):
    """An output path that cannot be written (read-only, under a file, disk full, file too
    large); the message names it, and the previous file, if any, is intact."""


def check_writable_folder(folder: PathLike) -> None:
    """Create ``folder`` (with its parents) and write and remove a probe file in it, so that a
    read-only or impossible output path (a path under a file) or a full disk fails now, with a
    message naming it, not after the work."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"cannot write to {folder}: it is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".gspdml-probe.", dir=folder)
        try:
            os.write(fd, bytes(PROBE_BYTES))
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"cannot write to {folder}: {exc.strerror or exc}") from None


def check_writable_file(path: PathLike) -> None:
    """:func:`check_writable_folder` for the folder of an output file that is not a folder itself."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder")
    check_writable_folder(path.parent)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_folder(folder: PathLike) -> None:
    """Flush a folder's entries (a rename into it) to disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: PathLike, write: Callable[[str], object]) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, flush it to disk and rename it over
    ``path`` (module docstring). The file gets the permissions of a plainly created one (``0666``
    less the umask; a temporary file alone would stay ``0600``, unreadable to a colleague). An
    ``OSError`` on the way is an :class:`OutputError` naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
    except OSError as exc:
        raise output_error(path, exc) from exc
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_folder(path.parent)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputError):
            raise output_error(path, exc) from exc
        raise


def atomic_write_text(path: PathLike, text: str) -> None:
    """Write a text file atomically (configs, results, reports)."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def json_text(value: Any, indent: int | None = None, sort_keys: bool = False) -> str:
    """``value`` as standard JSON: a non-finite float (NaN, +-inf) anywhere in it is written
    as ``null``, the one JSON value for "no number" (Python's ``json`` would write the
    non-standard tokens ``NaN`` / ``Infinity`` that other parsers refuse)."""
    return json.dumps(_finite(value), indent=indent, sort_keys=sort_keys, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    """Write a binary file atomically."""
    atomic_write(path, lambda tmp: Path(tmp).write_bytes(data))


def replace_folder(staging: PathLike, target: PathLike) -> None:
    """Put the folder ``staging`` in the place of ``target`` (same parent folder). An existing
    ``target`` is renamed aside first, put back if the second rename fails, and removed after it;
    no moment leaves neither folder on disk."""
    staging, target = Path(staging), Path(target)
    aside = None
    if target.exists():
        aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=target.parent))
        os.replace(target, aside)
    try:
        os.replace(staging, target)
    except BaseException:
        if aside is not None:
            os.replace(aside, target)
        raise
    fsync_folder(target.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def output_error(path: PathLike, exc: OSError) -> OutputError:
    """The :class:`OutputError` of a failed write of ``path`` (a full disk says so)."""
    full = exc.errno in DISK_FULL
    hint = " (free some space or write elsewhere)" if full else ""
    return OutputError(
        f"cannot write {path}: {exc.strerror or exc}{hint}; the previous file, if any, is intact"
    )


def remove_stale_temporaries(folder: PathLike) -> list[Path]:
    """Remove the temporary files that :func:`atomic_write` calls in ``folder`` left behind when
    their process was killed (``.NAME.<random>.tmp``); returns them. Only the folder's one
    writer may call it (another writer's file in progress has the same form)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    stale = [
        entry for entry in folder.iterdir() if _TEMPORARY.match(entry.name) and entry.is_file()
    ]
    for entry in stale:
        entry.unlink(missing_ok=True)
    return stale

"""Writing output files so that a crash, a kill or a full disk never leaves a damaged one.

* :func:`check_writable_folder` / :func:`check_writable_file`: a probe of :data:`PROBE_BYTES`
  written before the work, so a read-only target or a full disk fails at once;
* :func:`atomic_write`: written under a hidden temporary name beside the target
  (``.NAME.<random>.tmp``, ``NAME`` cut to :data:`TEMP_NAME_BYTES` bytes), flushed and renamed
  over it; a failure raises :class:`OutputError` and leaves the previous file untouched; the
  temporary is held (``flock``) while it is written (:func:`new_held_temporary`);
* :func:`remove_killed_temporaries`: the temporaries of one target (a file's, or a staging
  folder's holding that write's files only) that no running write holds, left by a killed one;
  :func:`remove_stale_temporaries`: every temporary file of a folder that no running write holds;
* :func:`swap_folder` / :func:`replace_folder`: a folder built beside its target takes its place
  in one atomic exchange (Linux ``renameat2(RENAME_EXCHANGE)``; elsewhere the previous folder is
  renamed aside first);
* :func:`json_text`: standard JSON (RFC 8259: a non-finite number is written as ``null``).

Temporaries of concurrent writes follow one rule. A write holds its temporary (``flock``,
released when the write closes it or its process dies) from before it writes into it until it has
renamed or removed it; a remover (both removers, one rule) removes a temporary only while it holds
it itself and its name still names the file it holds. So a killed write's temporary (held by
nobody) is removed, a running write's is kept, and no remover removes another's by mistake.

Creating a file and locking it are two system calls, and between them a new temporary is
visible, unheld, under its temporary name: a remover can hold and remove it there, and the write
would then write under a name no lock covers. :func:`new_held_temporary` closes that window on
the writer's side: it locks the file it created (waiting, if a remover holds it, until that
remover is done), then checks that the name still names the file it locked, and when not (a
remover took it) creates another. Once the check passes no remover can hold the file, so none
removes it, until the write closes it. The alternatives are not simpler: a lock on the folder or
a sibling lock file must be taken by every remover and creator and leaves a lock file (or needs
read access) in the user's folder; an unnamed file (``O_TMPFILE``) linked in once locked exists on
Linux only and on some file systems only, so it would still need this rule elsewhere.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from typing import Any, Union

from gspdml.errors import GspdmlError

PathLike = Union[str, Path]
PROBE_BYTES = 64 * 1024  # written by the output check: a full disk fails it
TEMP_SUFFIX = ".tmp"
#: at most this many bytes of a target's name start its temporary's (255 less the rest)
TEMP_NAME_BYTES = 200
#: the errors of a full disk, a quota, or a file-size limit
DISK_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
#: the eight random characters tempfile.mkstemp and mkdtemp put between prefix and suffix
_RANDOM = r"[a-z0-9_]{8}"
# the name tempfile.mkstemp gives: prefix ".NAME.", eight random characters, the suffix
_TEMPORARY = re.compile(r"^\..+\." + _RANDOM + r"\.tmp$")


class OutputError(GspdmlError, OSError):
    """An output path that cannot be written (read-only, under a file, disk full, file too
    large); the message names it, and the previous file, if any, is intact."""


def check_writable_folder(folder: PathLike) -> None:
    """Create ``folder`` and write and remove a probe file in it, so that an unwritable path or a
    full disk fails now, not after the work."""
    folder = Path(folder)
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "it" if existing == folder else str(existing)
        raise OutputError(f"cannot write to {folder}: {where} is a file, not a folder")
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


def refuse_linked_folders(folder: PathLike, names: Iterable[str]) -> None:
    """Raise :class:`OutputError` when one of the sub-folders ``names`` of ``folder`` is a
    symbolic link (its files would be written outside ``folder``)."""
    for name in names:
        path = Path(folder) / name
        if path.is_symlink():
            raise OutputError(
                f"cannot write into {path}: {path} is a symbolic link (to {os.readlink(path)}); "
                "gspdml never writes through a link out of the folder: replace it by the folder "
                "it names (or remove it)"
            )


def temporary_prefix(name: str) -> str:
    """``.NAME.``, the start of the name of a temporary beside ``NAME``, with ``NAME`` cut to
    :data:`TEMP_NAME_BYTES` bytes: the random part and the suffix still fit the 255 bytes a file
    name may have, so a target of a long name can be written too."""
    return f".{os.fsdecode(os.fsencode(name)[:TEMP_NAME_BYTES])}."


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
    """Call ``write(tmp)`` on a temporary file beside ``path``, flush it and rename it over
    ``path``, with the permissions of a plainly created file (``0666`` less the umask); an
    ``OSError`` is an :class:`OutputError` naming ``path``."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, held = new_held_temporary(path)  # held until closed, or the process dies
    except OSError as exc:
        raise output_error(path, exc) from exc
    tmp = str(held)
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
    finally:
        os.close(fd)


def atomic_write_text(path: PathLike, text: str) -> None:
    """Write a text file atomically (configs, results, reports)."""
    atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def json_text(
    value: Any,
    indent: int | None = None,
    sort_keys: bool = False,
    default: Callable[[Any], Any] | None = None,
) -> str:
    """``value`` as standard JSON: a non-finite float anywhere in it is written as ``null``;
    ``default``: as :func:`json.dumps`'s."""
    return json.dumps(
        _finite(value), indent=indent, sort_keys=sort_keys, allow_nan=False, default=default
    )


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


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _exchange(first: Path, second: Path) -> bool:
    """Swap the two existing paths ``first`` and ``second`` atomically; False where the system
    or the file system cannot (then nothing was changed)."""
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)
    if renameat2 is None:
        return False
    done = renameat2(
        _AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE
    )
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(second))


def swap_folder(staging: PathLike, target: PathLike) -> Path | None:
    """Put the folder ``staging`` in the place of ``target`` (same parent) and return where the
    previous ``target`` now is, or None when there was none."""
    staging, target = Path(staging), Path(target)
    if not os.path.lexists(target):
        os.replace(staging, target)
        fsync_folder(target.parent)
        return None
    if _exchange(staging, target):
        fsync_folder(target.parent)
        return staging
    aside = Path(tempfile.mkdtemp(prefix=f"{temporary_prefix(target.name)}old.", dir=target.parent))
    os.replace(target, aside / target.name)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(aside / target.name, target)
        aside.rmdir()
        raise
    fsync_folder(target.parent)
    return aside / target.name


def replace_folder(staging: PathLike, target: PathLike) -> None:
    """:func:`swap_folder`, then remove the previous ``target`` (a folder gspdml wrote whole)."""
    previous = swap_folder(staging, target)
    if previous is None:
        return
    if previous.is_symlink():  # a link in the target's place: the link goes, never what it names
        previous.unlink()
    shutil.rmtree(previous if previous == Path(staging) else previous.parent, ignore_errors=True)


def output_error(path: PathLike, exc: OSError) -> OutputError:
    """The :class:`OutputError` of a failed write of ``path`` (a full disk says so)."""
    full = exc.errno in DISK_FULL
    hint = " (free some space or write elsewhere)" if full else ""
    return OutputError(
        f"cannot write {path}: {exc.strerror or exc}{hint}; the previous file, if any, is intact"
    )


def remove_stale_temporaries(folder: PathLike) -> list[Path]:
    """Remove (and return) the temporary files of ``folder``, named as :func:`atomic_write` names
    them, that no running write holds: killed writes left them (module docstring)."""
    folder = Path(folder)
    removed = []
    for entry in list(folder.iterdir()) if folder.is_dir() else ():
        if _TEMPORARY.match(entry.name) and _remove_unheld(entry):
            removed.append(entry)
    return removed


def hold(path: PathLike) -> int:
    """A descriptor of the file or folder ``path`` (never a link) holding its ``flock``,
    released when it is closed or when the process dies; ``OSError`` when another holds it."""
    fd = _open_unfollowed(Path(path), Path(path).is_dir())
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_unfollowed(path: Path, folder: bool) -> int:
    flags = os.O_RDONLY | os.O_NOFOLLOW | (os.O_DIRECTORY if folder else 0)
    return os.open(path, flags)


def is_open_as(path: Path, fd: int) -> bool:
    """Whether ``path`` (a link not followed) is the file or folder open as ``fd``."""
    try:
        return os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd))
    except FileNotFoundError:
        return False


def new_held_temporary(path: PathLike, folder: bool = False) -> tuple[int, Path]:
    """A new temporary beside ``path`` (``.NAME.<random>.tmp``, a file, or a folder when
    ``folder``) and a descriptor holding its ``flock`` (:func:`new_held`)."""
    path = Path(path)
    return new_held(path.parent, temporary_prefix(path.name), TEMP_SUFFIX, folder)


def new_held(parent: Path, prefix: str, suffix: str, folder: bool) -> tuple[int, Path]:
    """A new file (or folder) ``parent/<prefix><random><suffix>`` and a descriptor holding its
    ``flock``: locked, then checked to be still the entry its name names, else another is made
    (module docstring: a remover may have taken it between its creation and its lock)."""
    while True:
        if folder:
            made = Path(tempfile.mkdtemp(prefix=prefix, suffix=suffix, dir=parent))
            try:
                fd = _open_unfollowed(made, folder=True)
            except FileNotFoundError:  # a remover took it already
                continue
        else:
            fd, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=parent)
            made = Path(name)
        try:  # waits only while a remover holds it, to remove it
            fcntl.flock(fd, fcntl.LOCK_EX)
            if is_open_as(made, fd):
                return fd, made
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _remove_unheld(entry: Path, folder_files: Collection[str] | None = None) -> bool:
    """Remove the temporary ``entry`` unless a running write holds it, and say whether it was
    removed: held (:func:`hold`) and checked to be what its name names while it is removed; a
    file, or with ``folder_files`` a folder holding none but these names. A link, an entry of
    the other kind or a folder holding anything else is kept."""
    if entry.is_symlink() or not (entry.is_file() if folder_files is None else entry.is_dir()):
        return False
    try:
        fd = hold(entry)
    except OSError:  # a write running now (or gone meanwhile)
        return False
    try:
        if not is_open_as(entry, fd):
            return False
        if folder_files is None:
            entry.unlink()
        elif set(os.listdir(entry)) <= set(folder_files):
            shutil.rmtree(entry, ignore_errors=True)
    finally:
        os.close(fd)
    return not os.path.lexists(entry)


def remove_killed_temporaries(
    target: PathLike, folder_files: Collection[str] | None = None
) -> list[Path]:
    """Remove (and return) the temporaries of ``target`` that killed writes left beside it:
    named as :func:`atomic_write` names a file's (``.NAME.<random>.tmp``) and held by no running
    write (:func:`hold`). ``folder_files``: the temporaries are staging folders instead (a folder
    written whole), removed only when they hold none but these names; anything else named
    alike (a link, a folder of the user's, a file where a folder is staged) is kept."""
    target = Path(target)
    pattern = re.compile(
        re.escape(temporary_prefix(target.name)) + _RANDOM + re.escape(TEMP_SUFFIX)
    )
    removed = []
    for entry in list(target.parent.iterdir()) if target.parent.is_dir() else ():
        if pattern.fullmatch(entry.name) and _remove_unheld(entry, folder_files):
            removed.append(entry)
    return removed

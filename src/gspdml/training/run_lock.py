"""One writer per folder: an exclusive operating-system lock on ``FOLDER/.gspdml.lock``.

A training run holds its run directory's lock until the end of ``fit``, ``gspdml index`` its
index folder's; a second writer fails at once with :class:`FolderLocked` naming the holder.
The lock is ``flock``, released by the operating system however the holder exits; readers take
none. The lock file must be the folder's own regular file (``O_NOFOLLOW``, one name): anything
else is refused with :class:`LockFileRefused` before anything is written.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Optional

from gspdml.errors import GspdmlError
from gspdml.output_files import refuse_linked_folders, remove_stale_temporaries

LOCK_FILE = ".gspdml.lock"


class FolderLocked(GspdmlError):
    """Another process is writing the folder."""


class LockFileRefused(GspdmlError):
    """The lock path is not a plain file of the folder's own."""


class FolderLock:
    """The exclusive lock of ``folder`` (created if needed), taken at construction."""

    def __init__(self, folder: str | Path, purpose: str):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._fd: Optional[int] = _open_own_file(self.folder / LOCK_FILE)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(self._fd)
            os.close(self._fd)
            self._fd = None
            raise FolderLocked(
                f"{self.folder} is being written by {holder}; wait for it to finish or use "
                "another folder"
            ) from None
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(sys.argv) or sys.executable,
            "purpose": purpose,
            "since": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, json.dumps(record).encode(), 0)

    def release(self) -> None:
        """Give the lock up (idempotent); the file stays, empty, for the next writer."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def lock_run_folder(folder: Path, subfolders: list[str], purpose: str) -> FolderLock:
    """The lock of a run folder, then a link in place of one of its ``subfolders`` refused and a
    killed writer's temporary files removed (the lock is released when that fails)."""
    lock = FolderLock(folder, purpose)
    try:
        refuse_linked_folders(folder, subfolders)
        for path in {folder, *(folder / name for name in subfolders)}:
            remove_stale_temporaries(path)
    except BaseException:
        lock.release()
        raise
    return lock


def check_unlocked(folder: str | Path) -> None:
    """Raise :class:`FolderLocked` or :class:`LockFileRefused` now, before minutes of work (the
    writer still takes the lock itself)."""
    path = Path(folder) / LOCK_FILE
    if os.path.lexists(path):
        FolderLock(folder, "check").release()


def _open_own_file(path: Path) -> int:
    """A read-write descriptor of the regular file ``path``, created if missing, never through a
    link (module docstring)."""
    fix = "remove it (gspdml creates its own lock file)"
    if os.path.isdir(path) and not os.path.islink(path):
        raise LockFileRefused(f"{path} is a folder, not gspdml's lock file; {fix}")
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise LockFileRefused(
                f"{path} is a symbolic link (to {os.readlink(path)}); gspdml never writes "
                f"through a link out of the folder: {fix}"
            ) from None
        raise LockFileRefused(f"cannot open the lock file {path}: {exc.strerror or exc}") from None
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = "not a regular file"
    elif info.st_nlink > 1:
        problem = f"a file with {info.st_nlink} names (a hard link to another file)"
    if problem is not None:
        os.close(fd)
        raise LockFileRefused(f"{path} is {problem}, not gspdml's lock file; {fix}")
    return fd


def _holder(fd: int) -> str:
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        record = {}
    if not isinstance(record, dict) or "pid" not in record:
        return "another process"
    return (
        f"pid {record['pid']} on {record.get('host', '?')} ({record.get('purpose', '?')}: "
        f"{record.get('command', '?')}, since {record.get('since', '?')})"
    )

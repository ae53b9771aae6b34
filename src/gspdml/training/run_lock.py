"""One writer per folder: an exclusive operating-system lock on ``FOLDER/.gspdml.lock``.

A training run (rank 0 of a data-parallel one) holds its run directory's lock from the trainer's
construction to the end of :meth:`~gspdml.training.trainer.Trainer.fit`, and ``gspdml index``
holds the lock of the index's folder while it writes. A second writer fails at once with a
:class:`FolderLocked` error naming the holder (pid, host, command, start time), instead of
interleaving its lines into ``metrics.jsonl`` or saving over the first one's files.

The lock is ``flock`` on the open file, so the operating system releases it when the holder
exits, however it exits: a lock file left by a killed process is not held and is simply taken
over. Readers (search, evaluate, report) take no lock.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Optional

from gspdml.errors import GspdmlError

LOCK_FILE = ".gspdml.lock"


class FolderLocked(GspdmlError):
    """Another process is writing the folder."""


class FolderLock:
    """The exclusive lock of ``folder`` (created if needed), taken at construction."""

    def __init__(self, folder: str | Path, purpose: str):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._fd: Optional[int] = os.open(self.folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
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


def check_unlocked(folder: str | Path) -> None:
    """Raise :class:`FolderLocked` when another process holds ``folder``'s lock now (a cheap
    early check before minutes of work; the writer still takes the lock itself)."""
    path = Path(folder) / LOCK_FILE
    if path.is_file():
        FolderLock(folder, "check").release()


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

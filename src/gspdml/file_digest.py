"""The content hash of a file: what a stored result, a data fingerprint or a duplicate check is
keyed by, never the file's path or size (a file replaced by another of the same size, or
rewritten in place, gets another hash).

A file's hash is computed once per process for as long as the file is unchanged: the hashes of
the last :data:`REMEMBERED` files are kept under their ``(device, inode, size, mtime_ns,
ctime_ns)``, which any write or replacement changes (the kernel sets ``ctime`` on every write and
rename; no program can set it back), so a changed file is hashed again. The key of what is
stored is always the content hash itself.
"""

from __future__ import annotations

import functools
import hashlib
import os

#: how many files' hashes one process remembers
REMEMBERED = 4096


def file_sha256(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of the bytes of the file ``path`` (module docstring); an ``OSError``
    (missing, unreadable) propagates."""
    status = os.stat(path)
    version = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
    return _sha256(os.fspath(path), version)


@functools.lru_cache(maxsize=REMEMBERED)
def _sha256(path: str, version: tuple[int, ...]) -> str:
    """The hash of ``path`` as it is at ``version`` (its stat fields; the cache key only)."""
    with open(path, "rb") as handle:
        return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()

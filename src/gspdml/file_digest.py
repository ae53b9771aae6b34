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

import hashlib
import os
from collections import OrderedDict

#: how many files' hashes one process remembers
REMEMBERED = 4096
#: ``sha256:<hex>`` by (path, the stat fields of the file that was read)
_HASHES: OrderedDict[tuple[str, tuple[int, ...]], str] = OrderedDict()


def file_sha256(path: str | os.PathLike[str]) -> str:
    """``sha256:<hex>`` of the bytes of the file ``path`` (module docstring); an ``OSError``
    (missing, unreadable) propagates. The stat fields are those of the open file, so a file
    replaced between a look-up and the read is never remembered under the older version."""
    with open(path, "rb") as handle:
        status = os.fstat(handle.fileno())
        key = (
            os.fspath(path),
            (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns),
        )
        if key in _HASHES:
            _HASHES.move_to_end(key)
            return _HASHES[key]
        digest = "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()
    _HASHES[key] = digest
    while len(_HASHES) > REMEMBERED:
        _HASHES.popitem(last=False)
    return digest

""":func:`gspdml.file_digest.file_sha256` is the hash of the bytes the file holds now: a file
rewritten in place with the same size, or replaced by another under its name, is hashed again."""

from __future__ import annotations

import hashlib
import os

from gspdml.file_digest import file_sha256


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def test_the_hash_follows_the_content_not_the_name_or_size(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 64)
    assert file_sha256(path) == _sha(b"a" * 64)
    stat = os.stat(path)
    with open(path, "r+b") as handle:  # same size, same mtime set back: only ctime changes
        handle.write(b"b" * 64)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_sha256(path) == _sha(b"b" * 64)
    other = tmp_path / "other.bin"
    other.write_bytes(b"c" * 64)
    os.replace(other, path)  # another file under the same name
    assert file_sha256(path) == _sha(b"c" * 64)
    assert file_sha256(str(path)) == _sha(b"c" * 64)  # a str path is the same file

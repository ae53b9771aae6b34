"""Fetch and verify the four benchmark datasets: resumable download, pinned checksums, atomic
extraction, official image counts.

* **Download** (:func:`download`): into ``ROOT/.downloads/<file>.part``, resumed with an HTTP
  ``Range`` request; a file that does not match its pinned size and digests is deleted.
* **Extraction** (:func:`extract`): into a staging folder inside ROOT, checked there by the
  dataset's reader and only then exchanged with the previous folder, so a failed fetch never
  leaves a half-extracted dataset; the user's files in the previous folder are kept
  (:mod:`gspdml.data.dataset_refresh`).
* **Checksums**: MD5 as published with the archives' download code (pytorch-metric-learning,
  torchvision); SHA-256 and size as TensorFlow Datasets publishes them (``url_checksums``). No
  digest is invented: where only an MD5 is published, the fetch records the SHA-256 it computed
  in ``ROOT/.gspdml-fetch-<name>.json``.

Datasets that cannot be downloaded (Cars196: the Stanford URL is dead, torchvision issue #7545;
In-Shop: Google Drive behind a licence form) print their manual steps; archives the user placed
in ROOT are checked and extracted the same way, and ``verify`` checks an extracted dataset.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
import tarfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Optional

from tqdm import tqdm

from gspdml.data.dataset_refresh import (
    SWAPPED_MARK,
    install,
    new_staging,
    recover_interrupted,
)
from gspdml.errors import DataError
from gspdml.output_files import (
    DISK_FULL,
    atomic_write_text,
    check_writable_folder,
    output_error,
    refuse_linked_folders,
)

CHUNK = 1 << 20
DOWNLOADS = ".downloads"


@dataclass(frozen=True)
class Archive:
    """One file of a dataset: where it comes from, its pinned digests (at least one) and size,
    whether to extract it."""

    filename: str
    md5: Optional[str] = None
    url: Optional[str] = None  # None: cannot be downloaded, the user places it
    extract: bool = True
    sha256: Optional[str] = None
    size: Optional[int] = None  # bytes

    def __post_init__(self) -> None:
        if self.md5 is None and self.sha256 is None:
            raise ValueError(f"{self.filename}: an archive needs a pinned MD5 or SHA-256")

    def mismatch(self, digests: dict[str, str]) -> Optional[str]:
        """What differs between the computed ``digests`` and the pinned ones, or None."""
        for kind, label in (("md5", "MD5"), ("sha256", "SHA-256")):
            pinned = getattr(self, kind)
            if pinned is not None and digests[kind] != pinned:
                return f"{label} {digests[kind]}, expected {pinned}"
        return None


@dataclass(frozen=True)
class DatasetSource:
    """A dataset's archives (``alternatives``: other complete sets the user may place instead),
    the check of the extracted folder, and the manual steps where an archive has no URL."""

    name: str
    archives: tuple[Archive, ...]
    check: Callable[[Path], int]  # raises DataError, returns the number of images
    manual: str = ""
    alternatives: tuple[tuple[Archive, ...], ...] = ()


def _digests(path: Path) -> dict[str, str]:
    md5, sha256 = hashlib.md5(), hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            md5.update(block)
            sha256.update(block)
    return {"md5": md5.hexdigest(), "sha256": sha256.hexdigest()}


def _next_read(written: int, size: Optional[int]) -> int:
    """Bytes to ask for next: a chunk, but never more than one byte beyond the pinned ``size``
    (that byte shows the server sends too much, whether or not it announced a length)."""
    return CHUNK if size is None else max(1, min(CHUNK, size - written + 1))


def download(
    archive: Archive, target: Path, progress: bool = True, timeout: float = 60.0
) -> dict[str, str]:
    """Download ``archive.url`` to ``target`` (resuming ``target.part``) and check its pinned
    size and digests; returns its digests."""
    url = archive.url
    if target.is_dir() and not target.is_symlink():  # the finished file could not replace it
        raise DataError(
            f"{target} is a folder, where the downloaded {archive.filename} goes; remove it "
            "and run the same command again"
        )
    if target.is_file():
        digests = _digests(target)
        if archive.mismatch(digests) is None:
            return digests
        target.unlink()
    if url is None:
        raise DataError(f"{archive.filename}: has no download URL; place it in the dataset root")
    part = target.with_name(target.name + ".part")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _held_part(part) as out:
        have = os.fstat(out.fileno()).st_size
        request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
        try:
            response = urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as err:
            if err.code != 416:  # 416: nothing left to send, the part is complete
                raise DataError(f"{url}: download failed (HTTP {err.code} {err.reason})") from None
            response = None
        except (urllib.error.URLError, OSError) as err:
            raise DataError(f"{url}: download failed ({getattr(err, 'reason', err)})") from None
        if response is not None:
            with response:
                resumed = response.status == 206
                total = _content_length(response.headers.get_all("Content-Length"), url, target)
                total = total + (have if resumed else 0) if total is not None else None
                if total is not None and archive.size is not None and total != archive.size:
                    raise DataError(
                        f"{url}: the server offers {total} bytes for {target.name}, the pinned archive has "
                        f"{archive.size}; not downloaded (changed upstream or a wrong URL)"
                    )
                out.truncate(have if resumed else 0)
                out.seek(0, os.SEEK_END)
                with tqdm(
                    total=total,
                    initial=have if resumed else 0,
                    unit="B",
                    unit_scale=True,
                    desc=target.name,
                    disable=not progress,
                ) as bar:
                    written = have if resumed else 0
                    try:
                        while block := response.read(_next_read(written, archive.size)):
                            written += len(block)
                            if archive.size is not None and written > archive.size:
                                break
                            out.write(block)
                            bar.update(len(block))
                        out.flush()
                    except OSError as err:
                        if err.errno in DISK_FULL:  # our write failed, not the connection
                            raise DataError(
                                f"cannot write {part}: {err.strerror} after {part.stat().st_size} "
                                "bytes; free some space and run the same command again to resume"
                            ) from None
                        out.flush()  # the bytes received so far, kept for the resume
                        raise DataError(
                            f"{url}: download interrupted after {part.stat().st_size} bytes ({err}); "
                            "run the same command again to resume"
                        ) from None
                if archive.size is not None and written > archive.size:
                    part.unlink()
                    raise DataError(
                        f"{url}: the server sent more than the pinned {archive.size} bytes of "
                        f"{target.name} (it announced no size); stopped and deleted (changed upstream, "
                        "a wrong URL or a hostile server)"
                    )
                if total is not None and part.stat().st_size < total:
                    raise DataError(
                        f"{url}: download interrupted after {part.stat().st_size} of {total} bytes; "
                        "run the same command again to resume"
                    )
        digests = _digests(part)
        wrong = archive.mismatch(digests)
        if wrong is not None:
            part.unlink()
            raise DataError(
                f"{url}: checksum mismatch for {target.name}: {wrong}; "
                "the file was deleted (corrupted or changed upstream)"
            )
        os.replace(part, target)
    return digests


def _content_length(values: Optional[list[str]], url: str, target: Path) -> Optional[int]:
    """The byte count the ``Content-Length`` header(s) announce, None without one. The same
    count repeated (``1000, 1000``, or the header twice, as some proxies send it) is that count
    (RFC 9110 §8.6); anything else is a :class:`DataError` naming it (http.client then reads
    until the connection closes, so the length is not known)."""
    if not values:
        return None
    counts = {part.strip() for value in values for part in value.split(",")}
    if len(counts) != 1 or not re.fullmatch(r"[0-9]+", next(iter(counts))):
        raise DataError(
            f"{url}: the server announced Content-Length {', '.join(values)!r}, not one byte "
            f"count; not downloaded (a broken server or proxy): try again later, or download "
            f"{target.name} by other means into {target.parent}"
        )
    return int(next(iter(counts)))


@contextlib.contextmanager
def _held_part(part: Path) -> Iterator[BinaryIO]:
    """The partial download ``part`` (created if missing), opened without following a link and
    held with ``flock`` while this fetch writes it: a link there (a received dataset root) or a
    second fetch of the same archive is refused, never written through or interleaved."""
    try:
        fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        if os.path.islink(part):
            raise DataError(
                f"{part} is a symbolic link; gspdml never writes through a link: remove it"
            ) from None
        raise output_error(part, err) from None
    with os.fdopen(fd, "r+b") as out:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DataError(f"{part} is not a regular file: remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DataError(
                f"another fetch is downloading {part}; wait for it to finish, then run the "
                "same command again"
            ) from None
        try:
            yield out
        finally:
            out.flush()
            _remove_if_still_empty(part, os.fstat(fd))


def _remove_if_still_empty(part: Path, held: os.stat_result) -> None:
    """Remove ``part`` when it is the held file and nothing was written to it (a refused
    download leaves no empty file)."""
    try:
        now = os.stat(part, follow_symlinks=False)
    except FileNotFoundError:  # renamed to the finished archive, or deleted
        return
    if os.path.samestat(now, held) and held.st_size == 0:
        part.unlink()


def _safe_members(names: Iterable[str], archive: Path) -> None:
    for name in names:
        parts = Path(name).parts
        if Path(name).is_absolute() or ".." in parts:
            raise DataError(f"{archive}: refusing archive member {name!r} (absolute path or '..')")


def extract(archive: Path, into: Path) -> None:
    """Unpack a .zip or .tar(.gz) archive into the folder ``into``."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            _safe_members(handle.namelist(), archive)
            handle.extractall(into)
        return
    try:
        with tarfile.open(archive) as handle:
            _safe_members(handle.getnames(), archive)
            handle.extractall(into, filter="data")
    except tarfile.TarError as err:
        raise DataError(f"{archive}: not a readable zip or tar archive ({err})") from None


def _archive_set(source: DatasetSource, root: Path) -> tuple[Archive, ...]:
    """The set of archives to fetch: the first whose every archive has a URL or lies in ROOT.
    Placed archives of the set the user went for (the one with most files in ROOT) are checked
    first, so a wrong file is named even while another is still missing."""
    sets = (source.archives, *source.alternatives)
    for archives in sets:
        if all(a.url is not None or (root / a.filename).is_file() for a in archives):
            return archives
    chosen = max(sets, key=lambda archives: sum((root / a.filename).is_file() for a in archives))
    for archive in chosen:
        if (root / archive.filename).is_file():
            _placed(archive, root)  # raises on a wrong file
    missing = [a.filename for a in chosen if a.url is None and not (root / a.filename).is_file()]
    raise DataError(
        f"{source.name}: {', '.join(missing)} cannot be downloaded automatically.\n{source.manual}"
    )


def _placed(archive: Archive, root: Path) -> tuple[Path, dict[str, str]]:
    """An archive the user placed in ROOT (no public URL), checked against its pinned digests."""
    path = root / archive.filename
    digests = _digests(path)
    wrong = archive.mismatch(digests)
    if wrong is not None:
        raise DataError(f"{path}: checksum mismatch: {wrong} (not the official file?)")
    return path, digests


def fetch(source: DatasetSource, root: str | Path, progress: bool = True) -> int:
    """Download (or take from ROOT), check, extract and verify a dataset; returns its image count.

    Raises DataError with the manual steps when an archive has no URL and is not in ROOT.
    """
    if not source.archives:
        raise DataError(f"{source.name}: cannot be downloaded automatically.\n{source.manual}")
    root = Path(root).expanduser()
    check_writable_folder(root)  # before any download: read-only, under a file, a full disk
    refuse_linked_folders(root, [DOWNLOADS])  # a received root: never written through a link
    archives = _archive_set(source, root)
    paths, record = {}, {}
    for archive in archives:
        if archive.url is None:
            paths[archive.filename], record[archive.filename] = _placed(archive, root)
        else:
            paths[archive.filename] = root / DOWNLOADS / archive.filename
            record[archive.filename] = download(archive, paths[archive.filename], progress)
    try:
        recover_interrupted(root, source.name)  # what a killed fetch of this dataset left
        staging, held = new_staging(root, source.name)
    except OSError as exc:
        raise output_error(root, exc) from exc
    try:
        for archive in archives:
            if archive.extract:
                extract(paths[archive.filename], staging)
            else:
                shutil.copyfile(paths[archive.filename], staging / archive.filename)
        count = source.check(staging)
        install(staging, root)
        staging.rmdir()
    except OSError as exc:  # a full disk while extracting: nothing in ROOT was replaced yet
        raise output_error(root, exc) from exc
    finally:
        if staging.is_dir() and not (staging / SWAPPED_MARK).exists():
            shutil.rmtree(staging, ignore_errors=True)  # only an extraction, no user file
        os.close(held)
    atomic_write_text(
        root / f".gspdml-fetch-{source.name}.json",
        json.dumps({"dataset": source.name, "images": count, "archives": record}, indent=1),
    )
    return count

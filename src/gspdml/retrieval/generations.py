"""An index folder's files replaced as one generation, with a manifest checked on load.

A save writes every file of the index into a fresh sub-folder ``generation-<n>-<random>``, each
flushed to disk, then replaces ``manifest.json`` atomically (the generation, its sub-folder, each
file's size and sha256), and only then removes the previous generation. That rename is the one
commit point: a save that fails or is killed before it leaves the previous generation current
and untouched; a sub-folder that no manifest names is removed by the next save.

Loading checks each listed file's size and sha256 before any reader opens it, a memory-mapped
``ann.faiss`` too (faiss's reader trusts the sizes a file claims, so an altered file is refused
before faiss sees it, at the cost of reading it once), and refuses a missing or altered file with
a :class:`~gspdml.errors.DataError` naming it; a reader that finds a file gone because a save
committed meanwhile reads the new generation. A folder written before manifests (the files at
the top level) is still read; the next save turns it into a generation. Only one process may
write a folder at a time (``gspdml index`` holds its
:class:`~gspdml.training.run_lock.FolderLock`).
"""

from __future__ import annotations

import hashlib
import secrets
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Optional

from gspdml.errors import DataError, read_json_object
from gspdml.output_files import (
    atomic_write,
    atomic_write_text,
    fsync_folder,
    json_text,
    remove_stale_temporaries,
)

MANIFEST_FILE = "manifest.json"
FORMAT = "gspdml-index-manifest"
VERSION = 1
PREFIX = "generation-"
#: the fix of a damaged index folder
REBUILD = "the index is damaged: rebuild it (gspdml index --overwrite)"


def file_record(path: Path) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of a file."""
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return {"bytes": path.stat().st_size, "sha256": digest}


def read_manifest(folder: Path) -> Optional[dict[str, Any]]:
    """The manifest of an index folder, or None when it has none (a folder written before
    manifests existed)."""
    path = folder / MANIFEST_FILE
    if not path.is_file():
        return None
    try:  # bounded: size, nesting
        manifest = read_json_object(path)
    except DataError as err:
        raise DataError(f"not a gspdml index manifest: {err}") from None
    files, name = manifest.get("files"), manifest.get("folder")
    if (
        manifest.get("format") != FORMAT
        or not isinstance(files, dict)
        or not isinstance(name, str)
        or not name.startswith(PREFIX)
        or Path(name).name != name
        or not all(isinstance(f, str) and Path(f).name == f for f in files)
    ):
        raise DataError(f"{path}: not a gspdml index manifest")
    if not isinstance(manifest.get("version"), int) or manifest["version"] > VERSION:
        raise DataError(
            f"{path}: manifest version {manifest.get('version')!r}; this gspdml reads up to {VERSION}"
        )
    number = manifest.get("generation")
    if type(number) is not int or number < 1:
        raise DataError(
            f"{path}: field 'generation' is {json_text(number)[:40]}, not a generation number; "
            f"{REBUILD}"
        )
    for listed, record in files.items():
        if not (
            isinstance(record, dict)
            and type(record.get("bytes")) is int
            and isinstance(record.get("sha256"), str)
        ):
            raise DataError(
                f"{path}: the record of {listed!r} is {json_text(record)[:80]}, not its bytes and "
                f"sha256; {REBUILD}"
            )
    return manifest


def verified_generation(folder: Path, manifest: dict[str, Any]) -> Path:
    """The sub-folder of the generation ``manifest`` names, every file of it checked against the
    manifest: its size, then its sha256."""
    where = f"generation {manifest.get('generation')} of {folder / MANIFEST_FILE}"
    directory: Path = folder / manifest["folder"]
    for name, expected in manifest["files"].items():
        path = directory / name
        if not path.is_file():
            raise DataError(
                f"{path}: missing, though listed in {where}; the index is partial: rebuild it "
                "(gspdml index --overwrite)"
            )
        size = path.stat().st_size
        if size != expected.get("bytes"):
            raise DataError(
                f"{path}: {size} bytes, {expected.get('bytes')} in {where}; the index is mixed "
                "or partial: rebuild it (gspdml index --overwrite)"
            )
        if file_record(path)["sha256"] != expected.get("sha256"):
            raise DataError(
                f"{path}: its sha256 differs from {where}; the file was altered: rebuild the "
                "index (gspdml index --overwrite)"
            )
    return directory


def write_generation(
    folder: Path, writers: dict[str, Callable[[str], object]], legacy: Iterable[str]
) -> Path:
    """Write a new generation of ``folder``: ``writers[name](tmp)`` writes file ``name``; the
    manifest is replaced last (module docstring). The previous generation and the top-level
    ``legacy`` files of a folder written before manifests are removed after the commit. Returns
    the new generation's sub-folder."""
    folder.mkdir(parents=True, exist_ok=True)
    previous = read_manifest(folder)
    current = previous["folder"] if previous else None
    for stale in folder.glob(PREFIX + "*"):
        if stale.name != current and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    remove_stale_temporaries(folder)  # a manifest whose writer was killed before its rename
    number = int(previous.get("generation", 0)) + 1 if previous else 1
    directory = folder / f"{PREFIX}{number:06d}-{secrets.token_hex(4)}"
    try:
        directory.mkdir()
        for name, write in writers.items():
            atomic_write(directory / name, write)
        fsync_folder(directory)
        manifest = {
            "format": FORMAT,
            "version": VERSION,
            "generation": number,
            "folder": directory.name,
            "files": {name: file_record(directory / name) for name in writers},
        }
        atomic_write_text(folder / MANIFEST_FILE, json_text(manifest, indent=1))
    except BaseException:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    if current:
        shutil.rmtree(folder / current, ignore_errors=True)
    for name in legacy:
        (folder / name).unlink(missing_ok=True)
    return directory


def holds_index(folder: Path, legacy_marker: str) -> bool:
    """Whether ``folder`` holds an index (a manifest, or the metadata file of an older one)."""
    return (folder / MANIFEST_FILE).is_file() or (folder / legacy_marker).is_file()

"""What a run trained on, recorded at its start (``RUN_DIR/data.json``) so that ``--resume`` can
tell when the data changed underneath it (a class renamed, images added, an image rewritten).

Per split: the number of items, the class names when the dataset has them, and for datasets of
files the file count and two digests: ``files`` over every relative name and size, ``content``
over the sha256 of every file's bytes (nothing sampled). Datasets without files record their
labels' digest. Every file is read once per start and resume (timing:
``python benchmarks/data_fingerprint.py``, docs/benchmarks.md).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Optional

import torch

from gspdml.data import DataSplits
from gspdml.file_digest import file_sha256


def fingerprint(data: DataSplits) -> dict[str, Any]:
    """The record of ``data`` (module docstring)."""
    parts: dict[str, Any] = {"train": data.train}
    for name in ("val", "test"):
        split = getattr(data, name)
        if split is not None:
            parts[f"{name}.query"] = split.query
            if split.gallery is not None:
                parts[f"{name}.gallery"] = split.gallery
    return {name: _describe(dataset) for name, dataset in parts.items()}


def differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """What changed between two fingerprints, in words (empty: the same data)."""
    changes = []
    for split in sorted(set(saved) | set(now)):
        old, new = saved.get(split), now.get(split)
        if old is None or new is None:
            changes.append(f"{split}: {'added' if old is None else 'gone'}")
            continue
        old_names, new_names = old.get("class_names"), new.get("class_names")
        if old_names is not None and new_names is not None and old_names != new_names:
            gone = sorted(set(old_names) - set(new_names))
            added = sorted(set(new_names) - set(old_names))
            parts = [_listing("removed", gone), _listing("added", added)]
            changes.append(f"{split}: classes {'; '.join(p for p in parts if p) or 'reordered'}")
        content = old.get("content"), new.get("content")
        if old.get("files") != new.get("files"):
            delta = new.get("num_files", 0) - old.get("num_files", 0)
            what = f"{abs(delta)} files {'added' if delta > 0 else 'removed'}"
            what = what if delta else "files changed"
            changes.append(f"{split}: {what} ({old.get('num_files')} -> {new.get('num_files')})")
        elif None not in content and content[0] != content[1]:  # both recorded it
            changes.append(
                f"{split}: the content of files changed (same {new.get('num_files')} names "
                "and sizes: an image was rewritten)"
            )
        elif old.get("items") != new.get("items") or old.get("labels") != new.get("labels"):
            changes.append(f"{split}: items {old.get('items')} -> {new.get('items')}")
    return changes


def _listing(kind: str, names: list[str]) -> str:
    if not names:
        return ""
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"{kind} {shown}"


def _describe(dataset: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"items": len(dataset)}
    names = getattr(dataset, "class_names", None)
    record["class_names"] = [str(n) for n in names] if names is not None else None
    paths = getattr(dataset, "paths", None)
    if paths:
        record["num_files"], record["files"] = len(paths), _files_digest(paths)
        record["content"] = content_digest(paths)
    else:
        labels = torch.as_tensor(dataset.labels).to(torch.int64).numpy().tobytes()
        record["labels"] = hashlib.sha256(labels).hexdigest()
    return record


def _files_digest(paths: list[str | Path]) -> str:
    root = Path(os.path.commonpath([str(p) for p in paths])) if len(paths) > 1 else None
    digest = hashlib.sha256()
    for path in sorted(str(p) for p in paths):
        name = os.path.relpath(path, root) if root is not None else Path(path).name
        digest.update(f"{name}\0{_size(path)}\n".encode())
    return digest.hexdigest()


def content_digest(paths: list[str | Path]) -> str:
    """sha256 over the sha256 of every file's bytes, in the order of the sorted paths (a file
    that cannot be read counts as missing: the reader names it when it is used)."""
    digest = hashlib.sha256()
    for path in sorted(str(p) for p in paths):
        try:
            digest.update(f"{file_sha256(path)}\n".encode())
        except OSError:
            digest.update(b"missing\n")
    return digest.hexdigest()


def _size(path: str) -> Optional[int]:
    try:
        return os.stat(path).st_size
    except OSError:
        return None

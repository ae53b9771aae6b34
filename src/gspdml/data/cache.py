"""On-disk cache of generated datasets: ``$GSPDML_CACHE`` or ``~/.cache/gspdml``.

Entries are ``.npz`` files named by a hash of everything that determines their content, written
to a temporary file in the same directory and renamed into place (``os.replace`` is atomic), so
concurrent runs never read a half-written file. An entry that cannot be read (empty, truncated,
not a zip archive) is rebuilt and replaced, with a warning naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np


def cache_dir() -> Path:
    """The cache directory (created on demand by :func:`cached_arrays`)."""
    root = os.environ.get("GSPDML_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "gspdml"


def cache_key(params: Mapping[str, Any]) -> str:
    """A short content hash of JSON-serialisable ``params``."""
    text = json.dumps(params, sort_keys=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cached_arrays(
    name: str,
    params: Mapping[str, Any],
    build: Callable[[], dict[str, np.ndarray]],
    enabled: bool = True,
) -> dict[str, np.ndarray]:
    """Load ``<cache>/<name>-<hash(params)>.npz`` or ``build()`` it and store it atomically."""
    if not enabled:
        return build()
    path = cache_dir() / f"{name}-{cache_key(params)}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as stored:
                return {key: stored[key] for key in stored.files}
        except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as error:
            # an empty, truncated or damaged entry (a full disk, a copy cut short) is rebuilt
            warnings.warn(
                f"dataset cache entry {path} is damaged ({type(error).__name__}: {error}); "
                "rebuilding it",
                stacklevel=2,
            )
    arrays = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            # savez's default, named so that the type checker knows **arrays does not fill it
            np.savez(file, allow_pickle=True, **arrays)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return arrays

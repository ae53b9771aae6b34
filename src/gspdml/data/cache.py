"""On-disk cache of generated datasets: ``$GSPDML_CACHE`` or ``~/.cache/gspdml``.

Entries are ``.npz`` files named by a hash of everything that determines their content, written
atomically (:func:`write_arrays`), so concurrent runs never read a half-written file; an entry
that cannot be read (empty, truncated, not a zip archive) is rebuilt and replaced
(:func:`read_arrays`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Optional

import numpy as np

from gspdml.output_files import atomic_write


def cache_dir() -> Path:
    """The cache directory (created on demand by :func:`cached_arrays`)."""
    root = os.environ.get("GSPDML_CACHE")
    return Path(root).expanduser() if root else Path.home() / ".cache" / "gspdml"


def cache_key(params: Mapping[str, Any]) -> str:
    """A short content hash of JSON-serialisable ``params``."""
    text = json.dumps(params, sort_keys=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def read_arrays(path: Path) -> Optional[dict[str, np.ndarray]]:
    """The arrays of the ``.npz`` file ``path``, or None when it is missing or damaged (empty,
    truncated, not a zip archive; a warning names it): the caller rebuilds it."""
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {key: stored[key] for key in stored.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as err:
        warnings.warn(
            f"{path}: damaged ({type(err).__name__}: {err}); it is rebuilt",
            RuntimeWarning,
            stacklevel=2,
        )
        return None


def write_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to the ``.npz`` file ``path`` atomically."""

    def write(tmp: str) -> None:
        with open(tmp, "wb") as file:
            # savez's default, named so that the type checker knows **arrays does not fill it
            np.savez(file, allow_pickle=True, **arrays)

    atomic_write(path, write)


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
    stored = read_arrays(path)
    if stored is not None:
        return stored
    arrays = build()
    write_arrays(path, arrays)
    return arrays

"""Checkpoints as safetensors: no pickle is ever loaded, and every write is atomic.

A training checkpoint holds nested state (model and loss weights, optimiser moments and
hyper-parameters, sampler position, RNG states, counters). :func:`save_state` stores every tensor
in a safetensors file and the structure around them (dicts with int or str keys, lists, numbers,
strings) as JSON in the file's metadata; :func:`load_state` rebuilds it. Files are written to a
temporary name in the same directory, flushed to disk and renamed over the old file, so a crash
or a full disk leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Union

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from gspdml.errors import GspdmlError

PathLike = Union[str, Path]
FORMAT = "gspdml-state/1"
PROBE_BYTES = 64 * 1024  # written by the output check: a full disk fails it


class CheckpointError(GspdmlError):
    """A checkpoint that is missing, not a gspdml checkpoint, or corrupt (the path is in the message)."""


class CheckpointWriteError(CheckpointError, OSError):
    """A checkpoint that cannot be written (disk full, file too large, permissions); the path and
    the cause are in the message and the previous file is intact."""


def save_state(path: PathLike, state: Any, meta: Mapping[str, Any] | None = None) -> None:
    """Write nested ``state`` atomically to ``path`` (safetensors + JSON structure)."""
    tensors: dict[str, torch.Tensor] = {}
    structure = _encode(state, tensors)
    header = {"format": FORMAT, "structure": structure, "meta": dict(meta or {})}
    try:
        atomic_write(
            Path(path), lambda tmp: save_file(tensors, tmp, metadata={"gspdml": json.dumps(header)})
        )
    except (
        Exception
    ) as exc:  # OSError (disk full, permissions), or safetensors' own error wrapping one
        raise CheckpointWriteError(
            f"cannot write {path}: {exc}; the previous file, if any, is intact"
        ) from exc


def load_state(path: PathLike, device: str | torch.device = "cpu") -> tuple[Any, dict[str, Any]]:
    """Read a file written by :func:`save_state`; returns ``(state, meta)``."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        with safe_open(str(path), framework="pt", device=str(device)) as handle:
            header = json.loads((handle.metadata() or {}).get("gspdml", "null"))
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise CheckpointError(f"{path} is not a gspdml checkpoint")
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except CheckpointError:
        raise
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from None
    try:
        return _decode(header["structure"], tensors), header["meta"]
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise CheckpointError(
            f"{path}: malformed checkpoint structure ({type(exc).__name__}: {exc}); the file was "
            "not written by gspdml or is damaged"
        ) from None


def _encode(obj: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        key = str(len(tensors))
        tensors[key] = obj.detach().to("cpu").contiguous().clone()
        return {"__tensor__": key}
    if isinstance(obj, Mapping):
        return {"__dict__": [[_encode_key(k), _encode(v, tensors)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return [_encode(v, tensors) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store {type(obj).__name__} in a checkpoint")


def _encode_key(key: Any) -> Any:
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(f"checkpoint dict keys must be int or str, got {key!r}")
    return key


def _decode(obj: Any, tensors: Mapping[str, torch.Tensor]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return tensors[obj["__tensor__"]]
        return {k: _decode(v, tensors) for k, v in obj["__dict__"]}
    if isinstance(obj, list):
        return [_decode(v, tensors) for v in obj]
    return obj


class OutputError(GspdmlError):
    """An output path that cannot be written (read-only, under a file, disk full); raised before the work."""


def check_writable_folder(folder: PathLike) -> None:
    """Create ``folder`` (with its parents) and write and remove a probe file in it, so that a
    read-only or impossible output path (a path under a file) or a full disk fails now, with a
    message naming it, not after the work."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"cannot write to {folder}: it is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".gspdml-probe.", dir=folder)
        try:
            os.write(fd, bytes(PROBE_BYTES))
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"cannot write to {folder}: {exc.strerror or exc}") from None


def check_writable_file(path: PathLike) -> None:
    """:func:`check_writable_folder` for the folder of an output file that is not a folder itself."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(f"cannot write {path}: it is a folder")
    check_writable_folder(path.parent)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write) -> None:
    """Call ``write(tmp)`` on a temporary file beside ``path``, flush it to disk and rename it over
    ``path``. The file gets the permissions of a plainly created one (``0666`` less the umask;
    a temporary file alone would stay ``0600``, unreadable to a colleague)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def atomic_write_text(path: PathLike, text: str) -> None:
    """Write a text file atomically (configs, results)."""
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))

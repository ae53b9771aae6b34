"""Checkpoints as safetensors: no pickle is ever loaded, and every write is atomic.

:func:`save_state` stores every tensor of a nested state in a safetensors file and the structure
around them (dicts with int or str keys, lists, numbers, strings) as JSON in its metadata;
:func:`load_state` rebuilds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Union

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from gspdml.errors import GspdmlError
from gspdml.output_files import atomic_write

PathLike = Union[str, Path]
FORMAT = "gspdml-state/1"


class CheckpointError(GspdmlError):
    """A checkpoint that is missing, not a gspdml checkpoint, or corrupt (the path is in the message)."""


class CheckpointWriteError(CheckpointError, OSError):
    """A checkpoint that cannot be written; the previous file is intact."""


def save_state(path: PathLike, state: Any, meta: Mapping[str, Any] | None = None) -> None:
    """Write nested ``state`` atomically to ``path`` (safetensors + JSON structure)."""
    tensors: dict[str, torch.Tensor] = {}
    structure = _encode(state, tensors)
    header = {"format": FORMAT, "structure": structure, "meta": dict(meta or {})}
    try:
        atomic_write(
            Path(path), lambda tmp: save_file(tensors, tmp, metadata={"gspdml": json.dumps(header)})
        )
    except OSError as exc:  # an OutputError naming the file (disk full, permissions)
        raise CheckpointWriteError(str(exc)) from exc
    except Exception as exc:  # safetensors' own error wrapping an OSError
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
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118 (safe_open is not iterable)
    except CheckpointError:
        raise
    except Exception as exc:  # safetensors raises its own error types for corrupt files
        raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from None
    try:
        if not isinstance(header["meta"], dict):
            raise TypeError(f"its meta is {type(header['meta']).__name__}, not an object")
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

"""Exceptions that name the problem: the file, the config field, the value."""

from __future__ import annotations

import difflib
import importlib
import json
import os
from collections.abc import Sequence
from types import ModuleType
from typing import Any


class GspdmlError(Exception):
    """Base class of every error gspdml raises on purpose."""


class ConfigError(GspdmlError, ValueError):
    """An invalid configuration, raised before any work starts; the message names the field
    (dotted path) and, where there is a closed set, the allowed values."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class DataError(GspdmlError):
    """A dataset file that is missing, malformed or cannot be decoded (the path is in the message)."""


class TrainingError(GspdmlError):
    """Training cannot continue (e.g. non-finite loss); the last good checkpoint is left intact."""


def import_optional(module: str, field: str, message: str) -> ModuleType:
    """``import module`` of an optional extra, or a :class:`ConfigError` at ``field`` saying
    ``message`` (what needs it and the ``pip install`` that adds it)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(field, message) from exc


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``; did you mean 'x'?`` naming the closest of ``choices`` (difflib), or nothing."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def printable(text: str) -> str:
    """``text`` safe to print or write as UTF-8: control characters and undecodable bytes
    (surrogates) become backslash escapes (``\\n``, ``\\x1b``, ``\\udcff``)."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


#: the largest JSON side file (bundle.json, preprocessing.json, index.json) read whole
MAX_JSON_BYTES = 16 << 20


def read_json_object(
    path: str | os.PathLike[str], max_bytes: int = MAX_JSON_BYTES
) -> dict[str, Any]:
    """The JSON object stored in ``path``, or a :class:`DataError` naming the file (missing, over
    ``max_bytes``, not UTF-8 JSON, nested too deep, not an object)."""
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise DataError(f"{path}: {size} bytes, more than a gspdml JSON file holds")
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:
        raise DataError(
            f"{path}: not a readable JSON file ({type(error).__name__}: {error})"
        ) from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value

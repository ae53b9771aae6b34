"""Exceptions that name the problem: the file, the config field, the value."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


class GspdmlError(Exception):
    """Base class of every error gspdml raises on purpose."""


class ConfigError(GspdmlError, ValueError):
    """An invalid configuration, raised before any work starts.

    The message always names the field (dotted path) and, where there is a closed set,
    the allowed values.
    """

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class DataError(GspdmlError):
    """A dataset file that is missing, malformed or cannot be decoded (the path is in the message)."""


class TrainingError(GspdmlError):
    """Training cannot continue (e.g. non-finite loss); the last good checkpoint is left intact."""


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``; did you mean 'x'?`` naming the closest of ``choices`` (difflib), or nothing."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def printable(text: str) -> str:
    """``text`` safe to print or write as UTF-8: control characters (a newline that would forge an
    output line, an escape sequence that would reach the terminal) and the undecodable bytes of a
    non-UTF-8 file name (surrogates, as Python decodes them) become backslash escapes (``\\n``,
    ``\\x1b``, ``\\udcff``); printable text is unchanged."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)

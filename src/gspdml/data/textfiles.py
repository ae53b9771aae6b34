"""Reading the text files of datasets (the index files of the official layouts, CSV lists of
images) with errors that name file and line.

Text is UTF-8, with or without a byte-order mark (a spreadsheet's "CSV UTF-8" writes one); a
file in another encoding (Latin-1, cp1252) is a :class:`DataError` naming the file, the line and
the byte, never a guess at the encoding.
"""

from __future__ import annotations

import csv
import io
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from gspdml.errors import DataError

#: the longest CSV field read: the csv module's limit (131,072 characters unless a program
#: changed it); a longer one is an error
CSV_FIELD_LIMIT = csv.field_size_limit()


def read_text(path: str | Path) -> str:
    """The text of ``path`` decoded as UTF-8 (a leading byte-order mark dropped), or a
    :class:`DataError` naming the file, the line and the byte that is not UTF-8, and the fix."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise DataError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[error.start]:02x} at column {column}); "
            'save the file as UTF-8 (a spreadsheet\'s "CSV UTF-8", or '
            f"iconv -f latin1 -t utf-8 {path.name} > utf8-{path.name})"
        ) from None


def read_csv_records(path: str | Path) -> list[tuple[int, list[str]]]:
    """The records of the CSV file ``path`` (text as :func:`read_text` reads it), each with the
    line it starts on; blank lines are left out. A field longer than :data:`CSV_FIELD_LIMIT`
    characters (usually a quote that is never closed, which makes the rest of the file one
    field) or any other malformed record is a :class:`DataError` naming the file and line."""
    path = Path(path)
    reader = csv.reader(io.StringIO(read_text(path), newline=""))
    records: list[tuple[int, list[str]]] = []
    try:
        while True:
            start = reader.line_num + 1
            try:
                record = next(reader)
            except StopIteration:
                return records
            if record:
                records.append((start, record))
    except csv.Error as error:
        raise DataError(
            f"{path}:{start}: malformed CSV ({error}); a field longer than {CSV_FIELD_LIMIT} "
            'characters is usually a quote (") that is never closed: close it or remove it'
        ) from None


def find_dir(root: str | Path, marker: str, candidates: Sequence[str], source: str) -> Path:
    """The first of ``root/<candidate>`` that contains ``marker`` (a file or folder)."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise DataError(f"{source}: dataset root {root} is not a directory")
    for sub in candidates:
        if (root / sub / marker).exists():
            return root / sub
    looked = ", ".join(str(root / sub / marker) for sub in candidates)
    raise DataError(f"{source}: missing {marker}; looked for {looked}")


def require_file(path: Path, source: str) -> Path:
    if not path.is_file():
        raise DataError(f"{source}: missing file {path}")
    return path


_Row = TypeVar("_Row", bound=NamedTuple)


def read_columns(path: Path, row_type: type[_Row], source: str, skip: int = 0) -> list[_Row]:
    """Rows of a whitespace-separated text file as ``row_type`` (a ``NamedTuple``: one field per
    column, in order; the fields annotated ``int`` must be integers); ``skip`` header lines.
    Blank lines are ignored."""
    require_file(path, source)
    columns, types = row_type._fields, typing.get_type_hints(row_type)
    rows: list[_Row] = []
    for number, line in enumerate(io.StringIO(read_text(path), newline=None), 1):
        if number <= skip or not line.strip():
            continue
        parts = line.split()
        if len(parts) != len(columns):
            raise DataError(
                f"{path}:{number}: expected {len(columns)} columns ({' '.join(columns)}), got {line.strip()!r}"
            )
        values: list[Any] = []
        for name, text in zip(columns, parts):
            try:
                values.append(types[name](text))
            except ValueError:
                raise DataError(
                    f"{path}:{number}: column {name} must be an integer, got {text!r}"
                ) from None
        rows.append(row_type(*values))
    if not rows:
        raise DataError(f"{path}: no entries")
    return rows

"""Reading the index files of the official dataset layouts with errors that name file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from gspdml.errors import DataError


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


def read_columns(
    path: Path, columns: Sequence[str], source: str, skip: int = 0, numeric: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Rows of a whitespace-separated text file as dicts; ``skip`` header lines; the columns
    named in ``numeric`` must be integers. Blank lines are ignored."""
    require_file(path, source)
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, 1):
            if number <= skip or not line.strip():
                continue
            parts = line.split()
            if len(parts) != len(columns):
                raise DataError(
                    f"{path}:{number}: expected {len(columns)} columns ({' '.join(columns)}), got {line.strip()!r}"
                )
            row: dict[str, Any] = dict(zip(columns, parts))
            for name in numeric:
                try:
                    row[name] = int(row[name])
                except ValueError:
                    raise DataError(
                        f"{path}:{number}: column {name} must be an integer, got {row[name]!r}"
                    ) from None
            rows.append(row)
    if not rows:
        raise DataError(f"{path}: no entries")
    return rows

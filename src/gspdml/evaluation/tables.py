"""Results tables in the layout of the thesis' tables (Markdown, plus the numbers as JSON).

- Fair protocol (Tab. 3.1, Tab. 5.1): one row per method, columns 512D P@1, 512D MAP@R,
  128D P@1, 128D MAP@R (:data:`FAIR_COLUMNS`).
- Conventional protocol (Tab. 3.2, Tab. 5.2: the best of the repeats): R@1 and MAP@R of the best
  run, then their mean ± std over the repeats (:data:`CONVENTIONAL_COLUMNS`).
- Tuning protocol (Tab. 5.4): validation P@1 and MAP@R, mean ± std over folds and repeats
  (:data:`TUNING_COLUMNS`).

Values are in percent as ``mean ± std``; the std is omitted for a single realisation or when a
cell has none. A row is a :func:`~gspdml.evaluation.aggregate.fair_protocol_results` output (or
any ``{"summary": {group: {metric: {"mean", "std"}}}, "num_realisations": n}``), or the summary
itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

FAIR_COLUMNS = (
    ("512D", "precision_at_1", "512D P@1"),
    ("512D", "map_at_r", "512D MAP@R"),
    ("128D", "precision_at_1", "128D P@1"),
    ("128D", "map_at_r", "128D MAP@R"),
)
CONVENTIONAL_COLUMNS = (
    ("best", "precision_at_1", "R@1"),
    ("best", "map_at_r", "MAP@R"),
    ("repeats", "precision_at_1", "R@1 (all repeats)"),
    ("repeats", "map_at_r", "MAP@R (all repeats)"),
)
TUNING_COLUMNS = (
    ("val", "precision_at_1", "val P@1"),
    ("val", "map_at_r", "val MAP@R"),
)
Columns = Sequence[tuple[str, str, str]]


def results_table_markdown(rows: Mapping[str, Mapping], *, columns: Columns = FAIR_COLUMNS, digits: int = 2) -> str:
    """A Markdown table: one row per method, ``columns`` = (group, metric, title) triples."""
    lines = ["| Method | " + " | ".join(title for _, _, title in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for name, result in rows.items():
        summary, count = _summary(result)
        cells = []
        for group, metric, _ in columns:
            cell = summary.get(group, {}).get(metric)
            cells.append("–" if cell is None else _format(cell, count, digits))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_results_table(rows: Mapping[str, Mapping], path, *, columns: Columns = FAIR_COLUMNS,
                        digits: int = 2) -> tuple[Path, Path]:
    """Write ``<path>.md`` (the table) and ``<path>.json`` ({row: summary}); returns both paths."""
    base = Path(path)
    base = base.with_suffix("") if base.suffix in (".md", ".json") else base
    base.parent.mkdir(parents=True, exist_ok=True)
    md, js = base.with_suffix(".md"), base.with_suffix(".json")
    md.write_text(results_table_markdown(rows, columns=columns, digits=digits))
    payload = {name: {"summary": _summary(r)[0], "num_realisations": _summary(r)[1]} for name, r in rows.items()}
    js.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return md, js


def _summary(result: Mapping) -> tuple[Mapping, int]:
    if "summary" in result:
        return result["summary"], int(result.get("num_realisations", 0))
    return result, 0


def _format(cell: Mapping, count: int, digits: int) -> str:
    mean = 100.0 * cell["mean"]
    std = cell.get("std")
    if count == 1 or std is None or math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {100.0 * std:.{digits}f}"

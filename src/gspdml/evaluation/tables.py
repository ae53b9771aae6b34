"""Results tables in the layout of the thesis' fair-protocol tables (Tab. 3.1, Tab. 5.1).

One row per method, columns 512D P@1, 512D MAP@R, 128D P@1, 128D MAP@R, values in percent as
``mean ± std`` (the std is omitted for a single realisation). Input: {row name:
:func:`~gspdml.evaluation.aggregate.fair_protocol_results` output (or its ``summary``)}.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

COLUMNS = (
    ("512D", "precision_at_1", "512D P@1"),
    ("512D", "map_at_r", "512D MAP@R"),
    ("128D", "precision_at_1", "128D P@1"),
    ("128D", "map_at_r", "128D MAP@R"),
)


def results_table_markdown(rows: Mapping[str, Mapping], *, digits: int = 2) -> str:
    """A Markdown table of fair-protocol results (percent, mean ± std over realisations)."""
    lines = ["| Method | " + " | ".join(title for _, _, title in COLUMNS) + " |",
             "|---|" + "---:|" * len(COLUMNS)]
    for name, result in rows.items():
        summary, count = _summary(result)
        cells = []
        for space, metric, _ in COLUMNS:
            cell = summary.get(space, {}).get(metric)
            cells.append("–" if cell is None else _format(cell, count, digits))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_results_table(rows: Mapping[str, Mapping], path, *, digits: int = 2) -> tuple[Path, Path]:
    """Write ``<path>.md`` (the table) and ``<path>.json`` ({row: summary}); returns both paths."""
    base = Path(path)
    base = base.with_suffix("") if base.suffix in (".md", ".json") else base
    base.parent.mkdir(parents=True, exist_ok=True)
    md, js = base.with_suffix(".md"), base.with_suffix(".json")
    md.write_text(results_table_markdown(rows, digits=digits))
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

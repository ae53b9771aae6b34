"""The one Markdown/JSON table writer of the package: every table a workflow prints or writes
(the demo's comparison, the protocols' results, the experiments' and the README's tables) goes
through :func:`markdown_table`, and every table written to disk through :func:`write_table`
(``<path>.md`` beside ``<path>.json`` with the same numbers).

The results tables have the layout of the thesis' tables:

- Fair protocol (Tab. 3.1, Tab. 5.1): one row per method, columns 512D P@1, 512D MAP@R,
  128D P@1, 128D MAP@R (:data:`FAIR_COLUMNS`).
- Conventional protocol (Tab. 3.2, Tab. 5.2: the best of the repeats): R@1 and MAP@R of the best
  run, then their mean ± std over the repeats (:data:`CONVENTIONAL_COLUMNS`).
- Split protocol (a dataset's own validation split, GSP paper supplement §2.2): test P@1 and
  MAP@R, mean ± std over the seeds (:data:`SPLIT_COLUMNS`).
- Tuning protocol (Tab. 5.4): validation P@1 and MAP@R, mean ± std over folds and repeats
  (:data:`TUNING_COLUMNS`).

Values are in percent as ``mean ± std`` (no std for a single realisation). The last column says
what the ± is over and how many independently trained models it rests on (the result's
``spread``). A row is a ``{"summary": {group: {metric: {"mean", "std"}}}, "num_realisations": n}``
(:func:`~gspdml.evaluation.aggregate.fair_protocol_results`), or the summary itself.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gspdml.evaluation.statistics import describe_spread
from gspdml.output_files import atomic_write_text, json_text

#: the title of the column that says what a row's ± is over
SPREAD_TITLE = "± is the"
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
SPLIT_COLUMNS = (("seeds", "precision_at_1", "P@1"), ("seeds", "map_at_r", "MAP@R"))
TUNING_COLUMNS = (("val", "precision_at_1", "val P@1"), ("val", "map_at_r", "val MAP@R"))
Columns = Sequence[tuple[str, str, str]]


def markdown_table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], *, numbers_right: bool = False
) -> str:
    """A Markdown table (no trailing newline); ``numbers_right`` right-aligns every column but the first."""
    rule = "|---|" + ("---:|" if numbers_right else "---|") * (len(header) - 1)
    lines = ["| " + " | ".join(header) + " |", rule]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_table(path: str | os.PathLike[str], markdown: str, payload: Any) -> tuple[Path, Path]:
    """Write ``<path>.md`` (``markdown``) and ``<path>.json`` (``payload``); returns both paths.
    A ``.md`` or ``.json`` suffix of ``path`` is dropped first; any other dot stays part of the
    name (``tables/ccp-table3.1`` writes ``ccp-table3.1.md``)."""
    base = Path(path)
    base = base.with_suffix("") if base.suffix in (".md", ".json") else base
    base.parent.mkdir(parents=True, exist_ok=True)
    md, js = base.with_name(f"{base.name}.md"), base.with_name(f"{base.name}.json")
    atomic_write_text(md, markdown)
    atomic_write_text(js, json_text(payload, indent=2, sort_keys=True) + "\n")
    return md, js


def results_table_markdown(
    rows: Mapping[str, Mapping[str, Any]], *, columns: Columns = FAIR_COLUMNS, digits: int = 2
) -> str:
    """A results table: one row per method, ``columns`` = (group, metric, title) triples."""
    body = []
    for name, result in rows.items():
        summary, count = _summary(result)
        cells = [summary.get(group, {}).get(metric) for group, metric, _ in columns]
        shown = ["–" if cell is None else _format(cell, count, digits) for cell in cells]
        spread = spread_text(result, [group for group, _, _ in columns]) if count != 1 else "–"
        body.append([name, *shown, spread])
    header = ["Method", *(title for _, _, title in columns), SPREAD_TITLE]
    return markdown_table(header, body, numbers_right=True) + "\n"


def spread_text(result: Mapping[str, Any], groups: Sequence[str]) -> str:
    """What the ± of ``groups`` in ``result`` is over ("sample std over 81 realisations built
    from 12 models ..."), "–" when the result does not say (a summary of an earlier release)."""
    spreads = result.get("spread", {}) if "summary" in result else {}
    texts = dict.fromkeys(describe_spread(spreads[g]) for g in groups if g in spreads)
    return "; ".join(texts) or "–"


def write_results_table(
    rows: Mapping[str, Mapping[str, Any]],
    path: str | os.PathLike[str],
    *,
    columns: Columns = FAIR_COLUMNS,
    digits: int = 2,
) -> tuple[Path, Path]:
    """Write ``<path>.md`` (the results table) and ``<path>.json`` ({row: summary}); returns both paths."""
    payload = {
        name: {
            "summary": _summary(r)[0],
            "num_realisations": _summary(r)[1],
            "spread": r.get("spread", {}) if "summary" in r else {},
        }
        for name, r in rows.items()
    }
    return write_table(path, results_table_markdown(rows, columns=columns, digits=digits), payload)


def _summary(result: Mapping[str, Any]) -> tuple[Mapping[str, Any], int]:
    if "summary" in result:
        return result["summary"], int(result.get("num_realisations", 0))
    return result, 0


def _format(cell: Mapping[str, Any], count: int, digits: int) -> str:
    mean = 100.0 * cell["mean"]
    std = cell.get("std")
    if count == 1 or std is None or math.isnan(std):
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} ± {100.0 * std:.{digits}f}"

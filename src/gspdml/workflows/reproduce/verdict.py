"""The verdict column of ``gspdml reproduce``: how a row's numbers stand against the paper's,
given only where the comparison means something.

A row's *status* says what was run ("trained", "evaluated", "missing: ...", "not selected");
its *verdict* compares the numbers, and only for a row run as the paper ran it:

- a row whose config differs from its preset in a key that changes the weights (any key but
  :data:`gspdml.training.config_changes.HARMLESS`, the data folder and the precision: a shorter
  schedule, a small backbone) is a smoke run: "smoke, no verdict";
- a row whose data folder is not the benchmark (:func:`gspdml.data.benchmarks.benchmark_check`:
  other image or class counts than the published ones) gets "not the benchmark, no verdict";
- otherwise each column with a paper number is *within* when |ours - paper| is at most the
  paper's printed ± (or :data:`TOLERANCE_POINTS` when the paper prints none), else *below* or
  *above*; the row is "within the paper's ± / 1 point" when every column is, else "below" or
  "above" (with the columns that are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

from gspdml.config import load_config
from gspdml.settings.schema import plain
from gspdml.training.config_changes import HARMLESS, config_differences

#: the band around a paper number printed without a ±, in points
TOLERANCE_POINTS = 1.0
#: keys a reproduction may change without leaving the paper's setting
SAME_SETTING = (*HARMLESS, "data.dataset.root", "trainer.precision")
SMOKE = "smoke, no verdict"
NOT_BENCHMARK = "not the benchmark, no verdict"


def smoke_keys(preset: str, overrides: Sequence[str]) -> list[str]:
    """The keys that ``overrides`` change in ``preset`` beyond :data:`SAME_SETTING`."""
    if not overrides:
        return []
    base = plain(load_config(preset))
    changed = plain(load_config(preset, list(overrides)))
    return [
        key
        for key in config_differences(base, changed)
        if not any(key == k or key.startswith(f"{k}.") for k in SAME_SETTING)
    ]


def cell_verdict(cell: Mapping[str, Any]) -> Optional[str]:
    """ "within", "below" or "above" for a cell with both numbers, else None."""
    paper, ours = cell.get("paper"), cell.get("ours")
    if paper is None or ours is None:
        return None
    band = cell.get("paper_std")
    band = TOLERANCE_POINTS if band is None else band
    if abs(ours - paper) <= band + 1e-9:
        return "within"
    return "below" if ours < paper else "above"


def row_verdict(
    cells: Mapping[str, Mapping[str, Any]],
    smoke: Sequence[str] = (),
    benchmark: Optional[Mapping[str, Any]] = None,
) -> str:
    """The verdict of one row (module doc); "–" when no column has both numbers."""
    if smoke:
        return SMOKE
    if benchmark is not None and not benchmark["is_benchmark"]:
        return NOT_BENCHMARK
    verdicts = {title: cell_verdict(cell) for title, cell in cells.items()}
    judged = {title: v for title, v in verdicts.items() if v is not None}
    if not judged:
        return "–"
    if all(v == "within" for v in judged.values()):
        printed = [cells[t].get("paper_std") is not None for t in judged]
        bands = ["the paper's ±"] * any(printed) + [_points()] * (not all(printed))
        return "within " + " / ".join(bands)
    parts = []
    for word in ("below", "above"):
        titles = [t for t, v in judged.items() if v == word]
        if titles:
            parts.append(f"{word} ({len(titles)} of {len(judged)}: {', '.join(titles)})")
    return "; ".join(parts)


def _points() -> str:
    return f"{TOLERANCE_POINTS:g} point" + ("" if TOLERANCE_POINTS == 1 else "s")

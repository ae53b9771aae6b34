"""The rows that set a run's test metrics beside its baselines (``results.json``'s ``baseline``:
the step-0 model and, for a pretrained backbone, its average-pooled features), shared by the HTML
report and the bundle's model card so that both state the same comparison."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def baseline_rows(results: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """``(columns, rows)``: columns ``metric, trained, <baseline names>``; one row per float test
    metric (counts left out), a baseline's missing metric as ``None``. Empty without baselines."""
    baselines = results.get("baseline") or {}
    test = results.get("test") or {}
    if not baselines or not test:
        return [], []
    names = list(baselines)
    rows = [
        [key, value, *(baselines[name].get(key) for name in names)]
        for key, value in test.items()
        if isinstance(value, float) and not key.startswith("num")
    ]
    return ["metric", "trained", *names], rows

"""The tables of the HTML report (:mod:`gspdml.retrieval.report`) that read what the run recorded:
the classes of each split (``data.json``), the per-class metrics of the report's images, the
best validation round (``metrics.jsonl``) and the step the weights come from (``results.json``). Every string is escaped with ``html.escape``.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from gspdml.evaluation.selection import selection_key
from gspdml.evaluation.service import QueryEvaluation
from gspdml.settings.sections import EvaluationConfig
from gspdml.training.run_dir import DATA_FILE

esc = html.escape

#: click a column head of a ``table.sortable`` to sort its rows by that column (again: reverse)
SORT_SCRIPT = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (head, column) {
    head.addEventListener("click", function () {
      var body = table.tBodies[0], numeric = head.dataset.kind === "number";
      var up = head.dataset.order !== "up";
      head.dataset.order = up ? "up" : "down";
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.value, y = b.cells[column].dataset.value;
        var order = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return up ? order : -order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""
#: class names shown before the rest is folded away
NAMES_SHOWN = 12


def split_classes_section(record: Optional[Mapping[str, Any]]) -> str:
    """The classes of every split the run recorded, train first (the class-disjoint split)."""
    if record is None:
        return (
            f'<p class="muted">The run records no {DATA_FILE} (it was trained before runs '
            "recorded their splits): the classes of its splits are unknown.</p>"
        )
    rows = []
    for split, entry in record.items():
        names = entry.get("class_names") if isinstance(entry, Mapping) else None
        items = entry.get("items", "?") if isinstance(entry, Mapping) else "?"
        if names is None:
            count, shown = (
                "?",
                '<span class="muted">not recorded (the dataset has class ids only)</span>',
            )
        else:
            count, shown = str(len(names)), _name_list([str(n) for n in names])
        rows.append(
            f"<tr><td>{esc(str(split))}</td><td>{esc(str(items))}</td><td>{count}</td><td>{shown}</td></tr>"
        )
    return (
        f'<p class="muted">As recorded at the start of training ({DATA_FILE}); the classes of the '
        "training split are never retrieved at test time.</p>"
        "<table><tr><th>split</th><th>images</th><th>classes</th><th>class names</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _name_list(names: Sequence[str]) -> str:
    listed = ", ".join(esc(n) for n in names)
    if len(names) <= NAMES_SHOWN:
        return listed
    first = ", ".join(esc(n) for n in names[:NAMES_SHOWN])
    return f"<details><summary>{first}, &hellip; ({len(names)} classes)</summary>{listed}</details>"


def metric_columns(recall_at: Sequence[int]) -> list[tuple[str, str]]:
    """``(heading, key)`` of the per-class table: MAP@R, R@1 (= P@1), R-precision, R@K (K > 1)."""
    columns = [("MAP@R", "map_at_r"), ("R@1", "precision_at_1"), ("R-precision", "r_precision")]
    return columns + [(f"R@{K}", f"recall_at_{K}") for K in recall_at if K > 1]


def per_class_section(
    evaluation: QueryEvaluation, recall_at: Sequence[int], where: str, lone: int
) -> str:
    """The per-class metrics table, worst class (lowest MAP@R) first, sortable by any column."""
    columns = metric_columns(recall_at)
    ordered = sorted(
        evaluation.per_class.items(), key=lambda item: (item[1]["map_at_r"], str(item[0]))
    )
    head = '<th data-kind="text">class</th><th data-kind="number">images</th>' + "".join(
        f'<th data-kind="number">{esc(title)}</th>' for title, _ in columns
    )
    body = "".join(
        f'<tr><td data-value="{esc(str(label))}">{esc(str(label))}</td>'
        f'<td data-value="{values["num_queries"]}">{values["num_queries"]}</td>'
        + "".join(_number_cell(values.get(key)) for _, key in columns)
        + "</tr>"
        for label, values in ordered
    )
    lone_note = (
        f" {lone} images are alone in their class (nothing to retrieve) and are not scored."
        if lone
        else ""
    )
    return (
        f'<p class="muted">Leave-one-out retrieval within {esc(where)}: each image queries all '
        f"the others. Mean per class over its images; worst class first (lowest MAP@R); click a "
        f"column to sort.{lone_note}</p>"
        f'<table class="sortable" id="per-class"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _number_cell(value: Optional[float]) -> str:
    if value is None or math.isnan(value):
        return '<td data-value="-1">-</td>'
    return f'<td data-value="{value!r}">{value:.4f}</td>'


def best_round(
    rows: Sequence[Mapping[str, Any]], evaluation: EvaluationConfig
) -> Optional[tuple[str, Mapping[str, Any]]]:
    """``(title, round)``: the validation round of ``metrics.jsonl`` with the largest value of
    the run's selection metric, the number the trainer selected its weights by
    (:func:`gspdml.evaluation.selection.selection_key`: ``evaluation.metric``, post-processed
    when ``evaluation.select_postprocessed``) on its rounds' split (``evaluation.split``), the
    first of equal values, as the trainer keeps the first; None without such a round."""
    key = selection_key(evaluation.metric, evaluation.select_postprocessed)
    rounds = [
        row
        for row in rows
        if row.get("split") == evaluation.split
        and not row.get("final")
        and isinstance(row.get(key), (int, float))
        and not isinstance(row.get(key), bool)
    ]
    if not rounds:
        return None
    best = max(rounds, key=lambda row: row[key])  # the first of equal maxima
    return f"Best validation round (by {key}, the run's selection metric)", best


def weights_step(results: Optional[Mapping[str, Any]], restore_best: bool) -> Optional[int]:
    """The step the run's final weights (and its test metrics) come from: ``results.json``'s
    ``weights_step``; for a run written before the trainer recorded it, ``best_step`` when
    ``evaluation.restore_best`` and the last step otherwise; None without results."""
    if not results or "steps" not in results:
        return None
    if "weights_step" in results:
        return int(results["weights_step"])
    restore = restore_best and "best_step" in results
    return int(results["best_step"] if restore else results["steps"])


def weights_step_note(results: Optional[Mapping[str, Any]], step: Optional[int]) -> str:
    """One sentence under the curves: which step's weights the test metrics are of."""
    if step is None or not results:
        return ""
    steps = int(results.get("steps", step))
    why = (
        "the last step" if step == steps else "the best validation round (evaluation.restore_best)"
    )
    return (
        f'<p class="muted" id="weights-step">The saved weights, and the test metrics (the test '
        f"marker), are those of step {step}: {why}; training ran {steps} steps.</p>"
    )

"""``gspdml reproduce`` of a ``resources`` table (Psomas thesis Tables 3.10 and 3.11): each
runnable row is a model whose parameters and multiply-adds are counted, nothing trained, no data
read; a column that is no count (Table 3.11's accuracy) is left without ours, the table's notes
say why.

A row's :class:`~gspdml.workflows.reproduce.resources_spec.ResourceSpec` names the ImageNet-1k classifier
(:func:`gspdml.models.resources.imagenet_classifier`); :func:`reproduce_resources` counts it
(:func:`gspdml.models.resources.count_resources`, 224 x 224) and writes the table with the
paper's numbers beside ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from gspdml.errors import ConfigError
from gspdml.models.resources import count_resources, imagenet_classifier
from gspdml.workflows.reproduce.registry import Table, select_rows
from gspdml.workflows.reproduce.report import (
    EvaluationPlan,
    Ours,
    evaluation_payload,
    row_entry,
    table_entries,
)
from gspdml.workflows.reproduce.resources_spec import IMAGE_SIZE, ResourceSpec
from gspdml.workflows.tables import markdown_table


def _plans(
    table: Table, rows: Sequence[str], overrides: Sequence[str]
) -> list[EvaluationPlan[ResourceSpec]]:
    """The selected rows, each with the classifier it counts (none for a missing row)."""
    if overrides:
        raise ConfigError(
            "overrides",
            f"{table.key} counts parameters and multiply-adds of fixed models: it takes no "
            f"settings (got {' '.join(overrides)})",
        )
    selected = select_rows(table, rows)
    return [
        EvaluationPlan(row, () if row.resources is None else (row.resources,)) for row in selected
    ]


def reproduce_resources(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> dict[str, Any]:
    """Count the selected rows' models (module doc) and write the table; returns its JSON
    payload (``rows``: one entry per row of the table, in its order)."""
    plans = _plans(table, rows, overrides)

    def run(plan: EvaluationPlan[ResourceSpec]) -> dict[str, Any]:
        (spec,) = plan.evaluations
        model = imagenet_classifier(spec.network, spec.pooling, spec.depth)
        counted = count_resources(model, IMAGE_SIZE)
        values = {"params": counted.params, "macs": counted.macs}
        ours: dict[str, Ours] = {  # a column that is not a count (an accuracy) is not measured
            column.title: (column.scale * values[column.metric], None)
            if column.metric in values
            else (None, None)
            for column in table.columns
        }
        return row_entry(table, plan.row, "evaluated", ours, {}, 1)

    entries = table_entries(table, plans, run)
    return evaluation_payload(table, entries, overrides, data_root, output_dir)


def resources_dry_run_markdown(table: Table, rows: Sequence[str], overrides: Sequence[str]) -> str:
    """``--dry-run`` of a ``resources`` table: the model each selected row counts."""
    plans = _plans(table, rows, overrides)
    body = [
        [plan.row.key, plan.row.resources.describe() if plan.row.resources else plan.row.status]
        for plan in plans
    ]
    runnable = sum(plan.runnable for plan in plans)
    return "\n".join(
        [
            f"{table.citation}: {len(plans)} rows ({runnable} runnable), protocol "
            f"`{table.protocol}`: each runnable row's model is built untrained and counted "
            "(parameters; multiply-adds of one image), nothing trained or read.",
            "",
            markdown_table(["Row", "Model"], body),
            "",
        ]
    )

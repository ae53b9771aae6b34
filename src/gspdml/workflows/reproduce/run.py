"""``gspdml reproduce TABLE``: run every row of a paper's table and print it beside the paper.

Every runnable row of the table (:mod:`gspdml.workflows.reproduce.registry`) is its preset,
with the user's overrides (``key.sub=value``, applied to every row) and ``--data-root`` (the
preset's ``data.dataset.root`` folder name under that directory; a backbone pre-training recipe
that reads its data from disk gets the directory as its ``data.root``, in a copy written to
``<output_dir>/recipes/``), run by the table's protocol
through :func:`gspdml.workflows.protocol.run_protocol`: each model is trained, resumed or
reused by the reuse rule of :mod:`gspdml.workflows.runner`, so a second call only aggregates,
and a row whose preset another table shares is trained once. A row's models live in
``<output_dir>/<protocol>/<preset>`` (``output_dir``: ``--output-dir``, else the preset's); a row
that fine-tunes another row's models (:attr:`~gspdml.workflows.reproduce.registry.Row.init_from`)
runs that row first, and each of its models starts from the model of the same seed
(``model.init_from``); the table is written to
``<output_dir>/tables/<table>.md`` and ``.json``: for every row and column the paper's number,
ours (mean over the protocol's realisations), the difference ours - paper and our sigma (the
std over the realisations: the 3^4 four-model ensembles of the fair protocol, the repeats of
the conventional one). Rows the library cannot run are listed with what is missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import yaml

from gspdml.config import RunConfig, load_config
from gspdml.errors import ConfigError, did_you_mean
from gspdml.evaluation.metric_registry import metrics_of_kind
from gspdml.evaluation.statistics import mean_std
from gspdml.output_files import atomic_write_text
from gspdml.training.pretrain import recipe_names, recipe_on_root
from gspdml.workflows.protocol import FOLDS_USED, SEED_MODELS, run_protocol
from gspdml.workflows.reproduce.registry import (
    SECONDS_PER_IMAGE,
    TYPICAL_STEPS,
    Column,
    Row,
    Table,
    select_rows,
)
from gspdml.workflows.reproduce.tables import TABLES
from gspdml.workflows.tables import markdown_table, write_table

DEFAULT_OUTPUT = "runs"
#: protocols whose summary has one group, which every column of a table reads (the ``split``
#: protocol: each seed's model on the test split, e.g. GSP Table 4's Cifar Collage "128D MAP@R")
ONE_GROUP = {"split": "seeds"}


@dataclass(frozen=True)
class RowPlan:
    """A row as it would run: its config (None for a missing row), the number of models of the
    protocol, the GPU-hour estimate of the registry's cost model, ``start``: the plan of the
    row whose models start this row's (:attr:`Row.init_from`), which runs first, and ``recipe``:
    the copy of the backbone's pre-training recipe with ``--data-root`` as its ``data.root``
    (:func:`~gspdml.training.pretrain.recipe_on_root`) and where it is written."""

    row: Row
    config: Optional[RunConfig]
    protocol: str
    models: int = 0
    steps: int = 0
    start: Optional["RowPlan"] = None
    recipe: Optional[tuple[Path, dict[str, Any]]] = None

    @property
    def root(self) -> Path:
        """Where the row's protocol runs: ``<output_dir>/<protocol>/<preset>`` (a preset names
        one run config, so tables that run it by the same protocol share its models; another
        protocol trains other models of it)."""
        output_dir = self.config.output_dir if self.config is not None else DEFAULT_OUTPUT
        return Path(output_dir) / self.protocol / str(self.row.preset)

    @property
    def batch(self) -> int:
        if self.config is None:
            return 0
        return int(self.config.data.classes_per_batch) * int(self.config.data.samples_per_class)

    @property
    def backbone(self) -> str:
        return str(self.config.model.backbone["name"]) if self.config is not None else ""

    @property
    def gpu_hours(self) -> float:
        rate = SECONDS_PER_IMAGE.get(self.backbone, SECONDS_PER_IMAGE["resnet50"])
        return self.models * self.steps * self.batch * rate / 3600.0


def get_table(key: str) -> Table:
    """The table named ``key`` (``gspdml reproduce --list`` shows them)."""
    if key not in TABLES:
        raise ConfigError(
            "table",
            f"no table {key!r}{did_you_mean(key, list(TABLES))}; gspdml reproduce --list shows them",
        )
    return TABLES[key]


def plan_table(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    seeds: Optional[Sequence[int]] = None,
    output_dir: Optional[str] = None,
) -> list[RowPlan]:
    """The selected rows (``rows``: patterns of :func:`select_rows`) with their configs."""
    seeds = tuple(seeds) if seeds else table.seeds
    return [
        _plan_row(table, row, data_root, overrides, seeds, output_dir)
        for row in select_rows(table, rows)
    ]


def records_clustering(preset: str, protocol: str) -> bool:
    """Whether the runs of ``preset`` by ``protocol`` record NMI (``evaluation.clustering``):
    when a table that runs them prints a clustering column (ProxyNCA++ Tables 3, 4, 7). Decided
    per preset and protocol, not per table, so that every table sharing these models asks for
    the same run config (a run directory refuses a run of another config)."""
    clustering = metrics_of_kind("clustering")
    return any(
        any(column.metric in clustering for column in table.columns)
        for table in TABLES.values()
        if any(row.preset == preset and table.protocol_of(row) == protocol for row in table.rows)
    )


def _plan_row(
    table: Table,
    row: Row,
    data_root: Optional[str],
    overrides: Sequence[str],
    seeds: Sequence[int],
    output_dir: Optional[str],
) -> RowPlan:
    protocol = table.protocol_of(row)
    if row.preset is None:
        return RowPlan(row, None, protocol)
    extra = [f"output_dir={output_dir}"] if output_dir is not None else []
    start = None
    if row.init_from is not None:
        (source,) = [r for r in table.rows if r.preset == row.init_from]
        start = _plan_row(table, source, data_root, overrides, seeds, output_dir)
        extra.append(f"model.init_from={start.root / SEED_MODELS[start.protocol]}")
    if records_clustering(row.preset, protocol):
        extra.append("evaluation.clustering=true")
    config = load_config(row.preset, [*extra, *overrides])
    root, recipe = config.data.dataset.get("root"), None
    if data_root is not None and root is not None:
        moved = Path(data_root) / Path(str(root)).name
        config = load_config(row.preset, [*extra, f"data.dataset.root={moved}", *overrides])
    weights = config.model.backbone.get("weights")
    if data_root is not None and isinstance(weights, str) and weights in recipe_names():
        copy = recipe_on_root(weights, data_root)
        if copy is not None:  # written by reproduce() before the row trains
            recipe = (Path(output_dir or DEFAULT_OUTPUT) / "recipes" / f"{weights}.yaml", copy)
            config = replace(
                config,
                model=replace(
                    config.model, backbone={**config.model.backbone, "weights": str(recipe[0])}
                ),
            )
    models = len(seeds) * {"fair": FOLDS_USED["fair"], "tuning": 1, "two_stage": 2}.get(protocol, 1)
    max_steps = int(config.schedule.max_steps)
    if config.evaluation.patience is None:
        steps = max_steps
    else:
        steps = min(max_steps, TYPICAL_STEPS.get(str(config.data.dataset["name"]), max_steps))
    return RowPlan(row, config, protocol, models, steps, start, recipe)


def reproduce(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    seeds: Optional[Sequence[int]] = None,
    output_dir: Optional[str] = None,
) -> dict[str, Any]:
    """Run the selected rows of ``table`` (see the module doc) and write the table; returns its
    JSON payload (``rows``: one entry per row of the table, in its order)."""
    seeds = tuple(int(s) for s in seeds) if seeds else table.seeds
    plans = plan_table(
        table,
        rows=rows,
        data_root=data_root,
        overrides=overrides,
        seeds=seeds,
        output_dir=output_dir,
    )
    selected = {plan.row.key: plan for plan in plans}
    entries = []
    for row in table.rows:
        plan = selected.get(row.key)
        if plan is None:
            entries.append(_entry(table, row, "not selected", None))
        elif plan.config is None:
            entries.append(_entry(table, row, row.status, None))
        else:
            if plan.start is not None:  # its models first (resumed or reused when there)
                start = plan.start
                assert start.config is not None  # a runnable row (Table checks init_from)
                _write_recipe(start)
                run_protocol(start.config, start.protocol, seeds=seeds, output_dir=start.root)
            _write_recipe(plan)
            result = run_protocol(plan.config, plan.protocol, seeds=seeds, output_dir=plan.root)
            entries.append(_entry(table, row, "reproduced", result))
    payload = {
        "table": table.key,
        "title": table.title,
        "citation": table.citation,
        "protocol": table.protocol,
        "seeds": list(seeds),
        "overrides": list(overrides),
        "data_root": data_root,
        "rows": entries,
    }
    base = Path(output_dir or DEFAULT_OUTPUT) / "tables" / table.key
    write_table(base, table_markdown(table, payload), payload)
    return payload


def _write_recipe(plan: RowPlan) -> None:
    """Write the row's copy of its backbone's pre-training recipe (:attr:`RowPlan.recipe`)."""
    if plan.recipe is not None:
        path, recipe = plan.recipe
        path.parent.mkdir(parents=True, exist_ok=True)
        content = {key: value for key, value in recipe.items() if key != "name"}  # the file's stem
        atomic_write_text(path, yaml.safe_dump(content, sort_keys=False))


def _entry(table: Table, row: Row, status: str, result: Optional[dict]) -> dict[str, Any]:
    cells = {}
    for column in table.columns:
        paper = row.paper.get(column.title)
        ours, ours_std = (
            _ours(result, column, table.protocol_of(row)) if result is not None else (None, None)
        )
        cells[column.title] = {
            "paper": None if paper is None else paper.value,
            "paper_std": None if paper is None else paper.std,
            "ours": ours,
            "ours_std": ours_std,
            "diff": None if paper is None or ours is None else ours - paper.value,
        }
    return {
        "key": row.key,
        "label": row.label,
        "dataset": row.dataset,
        "preset": row.preset,
        "status": status,
        "protocol": table.protocol_of(row),
        "num_realisations": None if result is None else result.get("num_realisations"),
        "runs": {} if result is None else result.get("runs", {}),
        "cells": cells,
    }


def _ours(result: dict, column: Column, protocol: str) -> tuple[Optional[float], Optional[float]]:
    """Our number of ``column`` in percent and its std over the realisations (None for one
    realisation). A row run by a protocol of one group (:data:`ONE_GROUP`) reads every column
    from that group. A metric the protocol's summary leaves out (R@k but R@1) is read from the
    models of a conventional or two-stage protocol: the best repeat's value ("best") or the
    mean over the repeats ("repeats"); None when the runs did not record it."""
    single = int(result.get("num_realisations", 0)) < 2  # no spread to report
    summary = result["summary"]
    if protocol in ONE_GROUP:
        column = Column(ONE_GROUP[protocol], column.metric, column.title)
    if column.metric in summary.get(column.group, {}):
        spread = summary.get(column.sigma_group or column.group, {}).get(column.metric, {})
        mean = summary[column.group][column.metric]["mean"]
        std = spread.get("std")
    else:
        values = [test.get(column.metric) for test in result.get("per_model", {}).values()]
        if not values or any(v is None for v in values) or "best_run" not in result:
            return None, None
        stats = mean_std(values)
        best = result["per_model"][result["best_run"]][column.metric]
        mean, std = (best if column.group == "best" else stats["mean"]), stats["std"]
    if single or std is None or math.isnan(std):
        return 100.0 * mean, None
    return 100.0 * mean, 100.0 * std


# ---------------------------------------------------------------------------------- Markdown
def _number(value: Optional[float], std: Optional[float] = None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if std is None else f"{value:.2f} ± {std:.2f}"


def table_markdown(table: Table, payload: dict) -> str:
    """The written table: per column the paper's number, ours ± sigma and ours - paper."""
    header = ["Method", "Dataset"]
    for column in table.columns:
        header += [f"{column.title} paper", f"{column.title} ours", "Δ"]
    header.append("Status")
    body = []
    for entry in payload["rows"]:
        line = [entry["label"], entry["dataset"]]
        for column in table.columns:
            cell = entry["cells"][column.title]
            diff = cell["diff"]
            line += [
                _number(cell["paper"], cell["paper_std"]),
                _number(cell["ours"], cell["ours_std"]),
                "–" if diff is None else f"{diff:+.2f}",
            ]
        own = "" if entry["protocol"] == table.protocol else f", protocol {entry['protocol']}"
        line.append(
            entry["status"]
            if entry["preset"] is None
            else f"{entry['status']} (`{entry['preset']}`{own})"
        )
        body.append(line)
    lines = [
        f"# {table.citation}: {table.title}",
        "",
        f"Protocol `{table.protocol}`, seeds {', '.join(map(str, payload['seeds']))}"
        + (f", overrides `{' '.join(payload['overrides'])}`" if payload["overrides"] else "")
        + ". Ours = mean ± std over the protocol's realisations; Δ = ours − paper (points).",
    ]
    if table.notes:
        lines += ["", table.notes]
    return "\n".join([*lines, "", markdown_table(header, body), ""])


def list_markdown() -> str:
    """``gspdml reproduce --list``: every table with its row counts."""
    body = [
        [t.key, t.citation, t.protocol, len(t.rows), len(t.runnable), len(t.rows) - len(t.runnable)]
        for t in TABLES.values()
    ]
    header = ["Table", "Source", "Protocol", "Rows", "Runnable", "Missing"]
    return markdown_table(header, body) + "\n"


def _loss_name(loss: Any) -> str:
    """A loss spec's name; a list of losses (a weighted sum) as ``a+b``."""
    if isinstance(loss, list):
        return "+".join(_loss_name(part) for part in loss)
    return str(loss["name"])


def dry_run_markdown(table: Table, plans: Sequence[RowPlan], seeds: Sequence[int]) -> str:
    """``--dry-run``: the runs of every selected row, their configs and the GPU-hour estimate."""
    body: list[list[Any]] = []
    for plan in plans:
        if plan.config is None:
            body.append([plan.row.key, "–", plan.row.status, *[""] * 8])
            continue
        config = plan.config
        body.append(
            [
                plan.row.key,
                f"`{plan.row.preset}`",
                str(plan.root),
                config.data.dataset.get("root", "–"),
                plan.models,
                _loss_name(config.loss),
                config.model.pooling["name"],
                plan.backbone,
                plan.batch,
                plan.steps,
                f"{plan.gpu_hours:.2f}",
            ]
        )
    header = [
        "Row",
        "Preset",
        "Run dir",
        "Data",
        "Models",
        "Loss",
        "Pooling",
        "Backbone",
        "Batch",
        "Steps/model",
        "GPU-h",
    ]
    starts = [
        f"`{plan.row.key}` starts from the models of `{plan.start.row.preset}` "
        f"({plan.start.root / SEED_MODELS[plan.start.protocol]}), trained first when missing."
        for plan in plans
        if plan.start is not None
    ]
    total = sum(plan.gpu_hours for plan in plans)
    runnable = sum(plan.config is not None for plan in plans)
    rates = ", ".join(f"{name} {1 / rate:.0f} img/s" for name, rate in SECONDS_PER_IMAGE.items())
    return "\n".join(
        [
            f"{table.citation}: {len(plans)} rows ({runnable} runnable), protocol `{table.protocol}`, "
            f"seeds {', '.join(map(str, seeds))}.",
            "",
            markdown_table(header, body),
            *(["", *starts] if starts else []),
            "",
            f"Estimated GPU-hours: {total:.1f} = sum over rows of models x steps x batch x seconds "
            f"per training image ({rates}). Steps: schedule.max_steps for fixed-length runs; for "
            "early-stopped runs the dataset's typical length (SOP 78K, In-shop 102K from Gürbüz "
            "thesis Table 3.3; CUB and Cars an assumed 3K). Evaluation and data loading are not "
            "counted. `gspdml config PRESET [overrides]` prints a row's full config.",
            "",
        ]
    )

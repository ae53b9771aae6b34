"""``gspdml reproduce TABLE``: run every row of a paper's table and print it beside the paper.

Every runnable row of the table (:mod:`gspdml.workflows.reproduce.registry`) is its preset with
the user's overrides and ``--data-root`` (a backbone pre-training recipe that reads its data
from disk gets a copy with that ``data.root``, written to ``<output_dir>/recipes/``), run by the
table's protocol through :func:`gspdml.workflows.protocol.run_protocol` in
:attr:`RowPlan.root`; the reuse rule of :mod:`gspdml.workflows.runner` makes a second call only
aggregate and trains a preset that tables share once. A row that fine-tunes another row's models
(:attr:`~gspdml.workflows.reproduce.registry.Row.init_from`) runs that row first. The table is
written by :mod:`gspdml.workflows.reproduce.report`: per row and column the paper's number, ours
(mean over the protocol's realisations), ours - paper, our sigma and the row's verdict
(:mod:`gspdml.workflows.reproduce.verdict`). A spec table
(:data:`~gspdml.workflows.reproduce.registry.SPEC_PROTOCOLS`) is run by its protocol's own runner
(:data:`SPEC_RUNNERS`, :func:`~gspdml.workflows.reproduce.spec_run.reproduce_spec`; ``cir``,
``resources``), one run per row and no seeds.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

import yaml

from gspdml.config import RunConfig, load_config
from gspdml.data.benchmarks import benchmark_check, describe_check
from gspdml.errors import ConfigError, did_you_mean
from gspdml.evaluation.metric_registry import metrics_of_kind
from gspdml.evaluation.statistics import mean_std
from gspdml.output_files import atomic_write_text
from gspdml.training.pretrain import Recipe, recipe_names, recipe_on_root
from gspdml.workflows.protocol import FOLDS_USED, SEED_MODELS, run_protocol
from gspdml.workflows.reproduce.cir_run import cir_dry_run_markdown, plan_cir, reproduce_cir
from gspdml.workflows.reproduce.classify_run import CLASSIFY
from gspdml.workflows.reproduce.frozen_run import FROZEN
from gspdml.workflows.reproduce.frozen_tasks_run import PROTOCOLS as TASK_PROTOCOLS
from gspdml.workflows.reproduce.frozen_tasks_run import TASKS
from gspdml.workflows.reproduce.probe_run import PROBE
from gspdml.workflows.reproduce.registry import (
    SECONDS_PER_IMAGE,
    SPEC_PROTOCOLS,
    TYPICAL_STEPS,
    Column,
    Row,
    Table,
    select_rows,
)
from gspdml.workflows.reproduce.report import (
    DEFAULT_OUTPUT,
    check_table_output,
    evaluation_payload,
    paper_markdown,
    row_entry,
    table_entries,
)
from gspdml.workflows.reproduce.resources_run import (
    reproduce_resources,
    resources_dry_run_markdown,
)
from gspdml.workflows.reproduce.revisited_run import REVISITED
from gspdml.workflows.reproduce.seed_tables import coverage_markdown
from gspdml.workflows.reproduce.spec_run import (
    SpecRunner,
    plan_spec,
    reproduce_spec,
    spec_dry_run_markdown,
)
from gspdml.workflows.reproduce.tables import TABLES
from gspdml.workflows.reproduce.verdict import smoke_keys
from gspdml.workflows.tables import markdown_table, spread_text

#: protocols whose summary has one group, which every column of a table reads (the ``split``
#: protocol: each seed's model on the test split, e.g. GSP Table 4's Cifar Collage "128D MAP@R")
ONE_GROUP = {"split": "seeds"}
#: the runner of each protocol of a spec table (``SPEC_PROTOCOLS``) whose rows are one stored
#: evaluation or training each (:mod:`gspdml.workflows.reproduce.spec_run`); ``cir`` and
#: ``resources`` have their own (:func:`reproduce_cir`, :func:`reproduce_resources`)
SPEC_RUNNERS: dict[str, SpecRunner[Any, Any, Any]] = {
    "frozen": FROZEN,
    "probe": PROBE,
    "revisited": REVISITED,
    "classify": CLASSIFY,
    **dict.fromkeys(TASK_PROTOCOLS, TASKS),
}


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
    start: Optional[RowPlan] = None
    recipe: Optional[tuple[Path, Recipe]] = None

    @property
    def runnable(self) -> bool:
        return self.config is not None

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
        return self.config.model.backbone_name if self.config is not None else ""

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
    root, recipe = config.data.dataset_root, None
    if data_root is not None and root is not None:
        moved = Path(data_root) / Path(str(root)).name
        config = load_config(row.preset, [*extra, f"data.dataset.root={moved}", *overrides])
    weights = config.model.backbone_weights
    if data_root is not None and weights is not None and weights in recipe_names():
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
        steps = min(max_steps, TYPICAL_STEPS.get(config.data.dataset_name, max_steps))
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
    """Run the selected rows of ``table`` (see the module doc; a spec table: its protocol's
    runner, :data:`SPEC_RUNNERS`) and write the table; returns its JSON payload
    (``rows``: one entry per row of the table, in its order)."""
    check_table_output(table, output_dir)  # before minutes or hours of work
    where = {"data_root": data_root, "output_dir": output_dir}
    if table.protocol in SPEC_PROTOCOLS:
        _no_seeds(table, seeds)
        if table.protocol == "cir":
            return reproduce_cir(table, rows=rows, overrides=overrides, **where)
        if table.protocol == "resources":
            return reproduce_resources(table, rows=rows, overrides=overrides, **where)
        runner = SPEC_RUNNERS[table.protocol]
        return reproduce_spec(runner, table, rows=rows, overrides=overrides, **where)
    seeds = tuple(int(s) for s in seeds) if seeds else table.seeds
    plans = plan_table(table, rows=rows, overrides=overrides, seeds=seeds, **where)

    def run(plan: RowPlan) -> dict[str, Any]:
        assert plan.config is not None  # runnable
        if plan.start is not None:  # its models first (resumed or reused when there)
            start = plan.start
            assert start.config is not None  # a runnable row (Table checks init_from)
            _write_recipe(start)
            run_protocol(start.config, start.protocol, seeds=seeds, output_dir=start.root)
        _write_recipe(plan)
        result = run_protocol(plan.config, plan.protocol, seeds=seeds, output_dir=plan.root)
        ours = {column.title: _ours(result, column, plan.protocol) for column in table.columns}
        runs, count = result.get("runs", {}), result.get("num_realisations")
        benchmark = benchmark_check(plan.config.data.dataset)
        if benchmark is not None and not benchmark["is_benchmark"]:
            print(
                f"gspdml reproduce: {plan.row.key}: not the benchmark, no verdict: "
                f"{describe_check(benchmark)}",
                file=sys.stderr,
            )
        groups = {c.sigma_group or c.group for c in table.columns}
        spread = spread_text(result, sorted(groups | set(ONE_GROUP.values())))
        return row_entry(
            table,
            plan.row,
            "trained",
            ours,
            runs,
            count,
            smoke=smoke_keys(str(plan.row.preset), overrides),
            benchmark=benchmark,
            spread=None if spread == "–" else spread,
        )

    entries = table_entries(table, plans, run)
    return evaluation_payload(table, entries, overrides, data_root, output_dir, seeds)


def _no_seeds(table: Table, seeds: Optional[Sequence[int]]) -> None:
    if seeds:
        raise ConfigError(
            "--seeds",
            f"{table.key} trains nothing (protocol {table.protocol}): its evaluations of a frozen "
            "model have no seeds; leave --seeds out"
            if table.protocol != "classify"
            else f"{table.key} trains one model per row with seed 0 (protocol classify); leave "
            "--seeds out",
        )


def _write_recipe(plan: RowPlan) -> None:
    """Write the row's copy of its backbone's pre-training recipe (:attr:`RowPlan.recipe`)."""
    if plan.recipe is not None:
        path, recipe = plan.recipe
        path.parent.mkdir(parents=True, exist_ok=True)
        content = recipe.file_content()  # its name is the file's stem
        atomic_write_text(path, yaml.safe_dump(content, sort_keys=False))


def _ours(
    result: dict[str, Any], column: Column, protocol: str
) -> tuple[Optional[float], Optional[float]]:
    """Our number of ``column`` (in percent unless the column scales otherwise) and its std over
    the realisations (None for one realisation). A row run by a protocol of one group
    (:data:`ONE_GROUP`) reads every column from that group. A metric the protocol's summary
    leaves out (R@k but R@1) is read from the
    models of a conventional or two-stage protocol: the best repeat's value ("best") or the
    mean over the repeats ("repeats"); None when the runs did not record it."""
    single = int(result.get("num_realisations", 0)) < 2  # no spread to report
    summary = result["summary"]
    if protocol in ONE_GROUP:
        column = replace(column, group=ONE_GROUP[protocol], sigma_group=None)
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
        return column.scale * mean, None
    return column.scale * mean, column.scale * std


def list_markdown() -> str:
    """``gspdml reproduce --list``: every table with its row counts, then how many of the papers'
    result tables have a key (:func:`~gspdml.workflows.reproduce.seed_tables.coverage_markdown`)."""
    body = [
        [t.key, t.citation, t.protocol, len(t.rows), len(t.runnable), len(t.rows) - len(t.runnable)]
        for t in TABLES.values()
    ]
    header = ["Table", "Source", "Protocol", "Rows", "Runnable", "Missing"]
    runnable = {key: len(table.runnable) for key, table in TABLES.items()}
    return f"{markdown_table(header, body)}\n\n{coverage_markdown(TABLES, runnable)}"


def dry_run(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    seeds: Optional[Sequence[int]] = None,
    output_dir: Optional[str] = None,
) -> str:
    """``gspdml reproduce TABLE --dry-run``: what the selected rows would run (a training table:
    :func:`dry_run_markdown`; a spec table: its evaluations or trainings and their inputs), then
    the paper's number of each selected row and column (:func:`paper_markdown`)."""
    if table.protocol in SPEC_PROTOCOLS:
        _no_seeds(table, seeds)
    where = {"data_root": data_root, "output_dir": output_dir}
    if table.protocol == "resources":
        planned = resources_dry_run_markdown(table, rows, overrides)
    elif table.protocol == "cir":
        cir_plans = plan_cir(table, rows=rows, overrides=overrides, need_memory=False, **where)
        planned = cir_dry_run_markdown(table, cir_plans)
    elif table.protocol in SPEC_RUNNERS:
        runner = SPEC_RUNNERS[table.protocol]
        _, spec_plans = plan_spec(runner, table, rows=rows, overrides=overrides, **where)
        planned = spec_dry_run_markdown(runner, table, spec_plans)
    else:
        plans = plan_table(table, rows=rows, overrides=overrides, seeds=seeds, **where)
        planned = dry_run_markdown(table, plans, seeds or table.seeds)
    return f"{planned}\n{paper_markdown(table, select_rows(table, rows))}"


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
                config.data.dataset_root or "–",
                plan.models,
                "+".join(config.loss_names),
                config.model.pooling_name,
                plan.backbone,
                plan.batch,
                plan.steps,
                f"{plan.gpu_hours:.2f}",
            ]
        )
    header = ["Row", "Preset", "Run dir", "Data", "Models", "Loss", "Pooling", "Backbone"]
    header += ["Batch", "Steps/model", "GPU-h"]
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

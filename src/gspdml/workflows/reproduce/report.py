"""The written table of ``gspdml reproduce``: one entry per row of a paper's table, with per
column the paper's number, ours, our std and the difference ours - paper (points), as JSON
(:func:`row_entry`) and as Markdown (:func:`table_markdown`). Shared by the training protocols
(:mod:`gspdml.workflows.reproduce.run`) and the spec tables' runners
(:data:`~gspdml.workflows.reproduce.registry.SPEC_PROTOCOLS`; ``cir``:
:mod:`gspdml.workflows.reproduce.cir_run`; ``frozen``:
:mod:`gspdml.workflows.reproduce.frozen_run`; ``classify``:
:mod:`gspdml.workflows.reproduce.classify_run`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Optional, Protocol, TypeVar

from gspdml.data.benchmarks import describe_check
from gspdml.errors import DataError, read_json_object
from gspdml.file_digest import file_sha256
from gspdml.output_files import atomic_write_text, check_writable_file, json_text
from gspdml.workflows.reproduce.registry import SPEC_PROTOCOLS, Row, Table
from gspdml.workflows.reproduce.verdict import TOLERANCE_POINTS, row_verdict
from gspdml.workflows.tables import markdown_table, write_table

#: where runs, evaluations and tables go without ``--output-dir``
DEFAULT_OUTPUT = "runs"

#: the statuses of a row that ran: a training protocol's, a spec table's
RAN = ("trained", "evaluated")
#: our number of a column in percent and its std (None: one realisation, or not measured)
Ours = tuple[Optional[float], Optional[float]]
#: what one row of a spec table is, per protocol (the written table's legend)
SPEC_ROW_LEGEND = {
    "cir": "one evaluation of a frozen vision-language model per row, nothing trained",
    "frozen": "one evaluation of a released pre-trained model per row and dataset (its test "
    "split, nearest-neighbour search on the L2-normalised features), nothing trained",
    "probe": "one evaluation of a released pre-trained model per row (ImageNet-1k top-1 of "
    "its frozen features: weighted k-NN, linear probe or its released classifier)",
    "resources": "a count of the row's model (parameters; multiply-adds of one 224 x 224 "
    "image), nothing trained",
    "revisited": "one evaluation of a released pre-trained model per row and dataset (its "
    "queries ranked against its database, Easy, Medium and Hard mAP), nothing trained",
    "localisation": "one evaluation of a released model's attention maps per row and dataset, "
    "nothing trained",
    "backgrounds": "one evaluation of a released classifier per row on every ImageNet-9 "
    "variation, nothing trained",
    "classify": "one classifier trained per row (one seed), evaluated by its top-1 on the test split",
}


def row_entry(
    table: Table,
    row: Row,
    status: str,
    ours: Mapping[str, Ours] = {},
    runs: Mapping[str, Any] = {},
    num_realisations: Optional[int] = None,
    model: Optional[str] = None,
    smoke: Sequence[str] = (),
    benchmark: Optional[Mapping[str, Any]] = None,
    spread: Optional[str] = None,
) -> dict[str, Any]:
    """A row of the written table; ``ours`` maps column titles to our (value, std); ``model``:
    the model spec that replaced a ``cir`` row's. ``cir`` / ``frozen``: what a spec table's row
    evaluates. ``status`` is what was run (:data:`RAN`, "missing: ...", "not selected");
    a row that ran gets a verdict (:func:`~gspdml.workflows.reproduce.verdict.row_verdict`;
    ``smoke``: the keys that make it a smoke run, ``benchmark``: the count check of its data)."""
    cells = {}
    for column in table.columns:
        paper = row.paper.get(column.title)
        value, std = ours.get(column.title, (None, None))
        cells[column.title] = {
            "paper": None if paper is None else paper.value,
            "paper_std": None if paper is None else paper.std,
            "ours": value,
            "ours_std": std,
            "diff": None if paper is None or value is None else value - paper.value,
        }
    return {
        "key": row.key,
        "label": row.label,
        "dataset": row.dataset,
        "preset": row.preset,
        "cir": None if row.cir is None else row.cir.describe(model),
        "frozen": None if row.frozen is None else row.frozen.describe(),
        "resources": None if row.resources is None else row.resources.describe(),
        "classify": None if row.classify is None else row.classify.describe(),
        "status": status,
        "verdict": row_verdict(cells, smoke, benchmark) if status in RAN else "–",
        "smoke_keys": list(smoke),
        "benchmark": None if benchmark is None else dict(benchmark),
        "spread": spread,
        "protocol": table.protocol_of(row),
        "num_realisations": num_realisations,
        "runs": dict(runs),
        "cells": cells,
    }


class PlannedRow(Protocol):
    """A selected row as a runner plans it: ``runnable`` is false for a row listed as missing."""

    @property
    def row(self) -> Row: ...

    @property
    def runnable(self) -> bool: ...


Plan = TypeVar("Plan", bound=PlannedRow)
Evaluation = TypeVar("Evaluation")


@dataclass(frozen=True)
class EvaluationPlan(Generic[Evaluation]):
    """A selected row of a spec table as it would run: its evaluations (none for
    a missing row; ``absent``: why a row that would run cannot here)."""

    row: Row
    evaluations: tuple[Evaluation, ...] = ()
    absent: Optional[str] = None

    @property
    def runnable(self) -> bool:
        return bool(self.evaluations)


def table_entries(
    table: Table, plans: Sequence[Plan], run: Callable[[Plan], dict[str, Any]]
) -> list[dict[str, Any]]:
    """One entry per row of ``table``, in its order: "not selected" outside ``plans``, the row's
    missing reason for a plan that cannot run, else the entry ``run(plan)`` makes."""
    selected = {plan.row.key: plan for plan in plans}
    entries = []
    for row in table.rows:
        plan = selected.get(row.key)
        if plan is None:
            entries.append(row_entry(table, row, "not selected"))
        elif not plan.runnable:
            entries.append(row_entry(table, row, row.status))
        else:
            entries.append(run(plan))
    return entries


class StoredEvaluation(Protocol):
    """An evaluation whose result may be stored already (None: not yet)."""

    def stored(self) -> Optional[dict[str, Any]]: ...


Stored = TypeVar("Stored", bound=StoredEvaluation)


def check_unstored(
    plans: Sequence[EvaluationPlan[Stored]], check: Callable[[Stored, Row], Any]
) -> None:
    """``check(evaluation, row)`` for every planned evaluation without a stored result, before
    the first one runs: a missing file is named before any work."""
    for plan in plans:
        for evaluation in plan.evaluations:
            if evaluation.stored() is None:
                check(evaluation, plan.row)


def scaled_ours(
    table: Table, result: Mapping[str, Any], shown: Optional[set[str]] = None
) -> dict[str, Ours]:
    """Each column's number in ``result`` (its ``metric``, times its ``scale``); none where the
    result has no such metric or the column's title is outside ``shown``."""
    ours: dict[str, Ours] = {}
    for column in table.columns:
        value = result.get(column.metric) if shown is None or column.title in shown else None
        ours[column.title] = (None if value is None else column.scale * value, None)
    return ours


def evaluations_markdown(
    table: Table, plans: Sequence[Any], header: Sequence[str], body: list[list[Any]], how: str
) -> str:
    """``--dry-run`` of a spec table: a count line, one table line per evaluation
    (``body``, its last cell "stored" or "to run") and ``how`` the evaluations work."""
    count = sum(len(plan.evaluations) for plan in plans)
    stored = sum(line[-1] == "stored" for line in body)
    runnable = sum(bool(plan.evaluations) for plan in plans)
    return "\n".join(
        [
            f"{table.citation}: {len(plans)} rows ({runnable} runnable), protocol "
            f"`{table.protocol}`: {count} evaluations, {stored} stored.",
            "",
            markdown_table(header, body),
            "",
            how,
            "",
        ]
    )


def _number(value: Optional[float], std: Optional[float] = None) -> str:
    if value is None:
        return "–"
    return f"{value:.2f}" if std is None else f"{value:.2f} ± {std:.2f}"


def paper_markdown(table: Table, rows: Sequence[Row]) -> str:
    """``--dry-run``'s last section: the number the paper printed in each column for each of
    ``rows`` (the columns none of them has are left out), before anything runs."""
    columns = [c for c in table.columns if any(c.title in row.paper for row in rows)]
    title = f"The paper's numbers ({table.citation}); the written table puts ours beside them."
    if not columns:
        return f"{title} The paper prints none for the selected rows.\n"
    body = []
    for row in rows:
        printed = [row.paper.get(column.title) for column in columns]
        body.append([row.key, *("–" if p is None else _number(p.value, p.std) for p in printed)])
    header = ["Row", *(column.title for column in columns)]
    return "\n".join([title, "", markdown_table(header, body), ""])


def _status(entry: Mapping[str, Any], table: Table) -> str:
    if entry.get("preset") is not None:
        own = "" if entry["protocol"] == table.protocol else f", protocol {entry['protocol']}"
        return f"{entry['status']} (`{entry['preset']}`{own})"
    evaluated = entry.get("cir") or entry.get("frozen") or entry.get("resources")
    if evaluated is not None:
        return f"{entry['status']} ({evaluated})"
    return str(entry["status"])


def _spread_words(table: Table, payload: Mapping[str, Any]) -> str:
    """What our ± is over, from the rows' protocol results: "sample std over 81 realisations
    built from 12 models (...)" (the distinct descriptions of the rows that ran)."""
    texts = dict.fromkeys(str(entry["spread"]) for entry in payload["rows"] if entry.get("spread"))
    return "; ".join(texts) if texts else "sample std over the protocol's realisations"


def table_markdown(table: Table, payload: dict[str, Any]) -> str:
    """The written table: per column the paper's number, ours ± sigma and ours - paper."""
    header = ["Method", "Dataset"]
    for column in table.columns:
        header += [f"{column.title} paper", f"{column.title} ours", "Δ"]
    header += ["Status", "Verdict"]
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
        line += [_status(entry, table), entry.get("verdict", "–")]
        body.append(line)
    overrides = f", overrides `{' '.join(payload['overrides'])}`" if payload["overrides"] else ""
    if table.protocol in SPEC_PROTOCOLS:
        how = (
            f"Protocol `{table.protocol}`{overrides}: {SPEC_ROW_LEGEND[table.protocol]}; "
            "ours is that evaluation's number (no std)"
        )
    else:
        how = (
            f"Protocol `{table.protocol}`, seeds {', '.join(map(str, payload['seeds']))}"
            f"{overrides}. Ours = mean ± {_spread_words(table, payload)}"
        )
    verdicts = (
        "Status: what was run. Verdict: each column is within when |Δ| is at most the paper's ± "
        f"(or {TOLERANCE_POINTS:g} point where the paper prints none), else below or above; given "
        "only for a row at its preset's schedule on the benchmark's data (a smoke run or another "
        "data folder says why it has none)."
    )
    lines = [
        f"# {table.citation}: {table.title}",
        "",
        f"{how}; Δ = ours − paper (points).",
        "",
        verdicts,
    ]
    notes = [
        f"{entry['label']} ({entry['dataset']}): not the benchmark: "
        f"{describe_check(entry['benchmark'])}"
        for entry in payload["rows"]
        if entry.get("benchmark") and not entry["benchmark"]["is_benchmark"]
    ]
    if notes:
        lines += ["", *notes]
    if table.notes:
        lines += ["", table.notes]
    return "\n".join([*lines, "", markdown_table(header, body), ""])


def stored_result(
    path: Path, settings: Mapping[str, Any], problem: Callable[[dict[str, Any]], Optional[str]]
) -> Optional[dict[str, Any]]:
    """The result an evaluation stored in ``path`` with exactly these ``settings`` (everything
    that decides its numbers, files by their content: :func:`content_of`), None when there is
    none yet. A stored file that cannot be read, or whose result ``problem`` finds fault with
    (a missing field, a type, a value out of range: a recall of 7.5), is None too, with a line
    on stderr: the evaluation runs again and replaces it."""
    if not path.is_file():
        return None
    try:
        stored = read_json_object(path)
    except DataError as error:
        print(f"gspdml: {error}; it is evaluated again", file=sys.stderr)
        return None
    if stored.get("settings") != dict(settings):
        return None
    result = stored.get("result")
    fault = problem(result) if isinstance(result, dict) else "'result' is not an object"
    if fault is not None:
        print(
            f"gspdml: {path}: the stored result is invalid ({fault}); it is evaluated again",
            file=sys.stderr,
        )
        return None
    return result


def number_problem(values: Mapping[str, Any], key: str, top: float) -> Optional[str]:
    """What is wrong with ``values[key]`` as a score in ``[0, top]`` (None: nothing)."""
    value = values.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{key!r} is {value!r}, not a number"
    if not 0 <= value <= top:
        return f"{key!r} is {value!r}, outside [0, {top:g}]"
    return None


def content_of(file: Optional[str | Path]) -> Optional[str]:
    """What a stored result depends on for ``file``: the content hash of a file (so a file
    replaced by another, of any size, gets another key), the text given otherwise (a folder,
    a model tag, a missing file), None for none."""
    if file is None:
        return None
    path = Path(file).expanduser()
    return file_sha256(path) if path.is_file() else str(file)


def store_result(path: Path, settings: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    """Store an evaluation's ``result`` beside its ``settings`` in ``path`` (atomically)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json_text({"settings": dict(settings), "result": dict(result)}, indent=2)
    atomic_write_text(path, text + "\n")


def evaluation_payload(
    table: Table,
    entries: Sequence[dict[str, Any]],
    overrides: Sequence[str],
    data_root: Optional[str],
    output_dir: Optional[str],
    seeds: Sequence[int] = (),
) -> dict[str, Any]:
    """The JSON payload of a table (a spec table has no ``seeds``), written with
    :func:`write_payload`."""
    payload = {
        "table": table.key,
        "title": table.title,
        "citation": table.citation,
        "protocol": table.protocol,
        "seeds": list(seeds),
        "overrides": list(overrides),
        "data_root": data_root,
        "rows": list(entries),
    }
    write_payload(table, payload, output_dir)
    return payload


def _table_base(table: Table, output_dir: Optional[str]) -> Path:
    return Path(output_dir or DEFAULT_OUTPUT) / "tables" / table.key


def check_table_output(table: Table, output_dir: Optional[str]) -> None:
    """Before any training or evaluation: ``<output_dir>/tables/<table>.md`` and ``.json`` can
    be written (``output_dir`` or ``tables`` a file, a target that is a folder, a read-only
    folder, a full disk: an :class:`~gspdml.output_files.OutputError` naming the path)."""
    base = _table_base(table, output_dir)
    for suffix in (".md", ".json"):
        check_writable_file(base.with_name(base.name + suffix))


def write_payload(table: Table, payload: dict[str, Any], output_dir: Optional[str]) -> None:
    """Write ``<output_dir>/tables/<table>.md`` and ``.json``."""
    write_table(_table_base(table, output_dir), table_markdown(table, payload), payload)

"""How ``gspdml reproduce`` runs a spec table whose every runnable row is one stored evaluation
(or training) of a pinned model: protocols ``frozen``, ``probe``, ``revisited``,
``localisation``, ``backgrounds`` and ``classify``. What is particular to a protocol is its
:class:`SpecRunner` (its settings, a row's evaluation, how it is computed, the columns it fills,
its ``--dry-run`` cells); the rest is the same for every one of them:

1. the ``key=value`` settings are parsed (a wrong one is a ConfigError naming it);
2. each selected row becomes its evaluation, stored in
   ``<output_dir>/<protocol>/<dataset>/<stem>-<key>.json``, ``key`` hashing everything that
   decides its numbers (:func:`result_file`); a row without one is listed with its reason;
3. every evaluation without a stored result has its model file checked before the first one
   runs (:func:`~gspdml.workflows.reproduce.report.check_unstored`);
4. each row's result is the stored one (:func:`~gspdml.workflows.reproduce.report.stored_result`),
   else computed now and stored;
5. the table is written with the paper's numbers beside ours
   (:func:`~gspdml.workflows.reproduce.report.evaluation_payload`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Optional, Protocol, TypeVar

from gspdml.data.cache import cache_key
from gspdml.workflows.reproduce.registry import Row, Table, select_rows
from gspdml.workflows.reproduce.report import (
    DEFAULT_OUTPUT,
    EvaluationPlan,
    check_unstored,
    evaluation_payload,
    evaluations_markdown,
    row_entry,
    scaled_ours,
    store_result,
    table_entries,
)
from gspdml.workflows.reproduce.settings import parse_settings

if TYPE_CHECKING:
    from gspdml.workflows.reproduce.frozen_spec import FrozenSpec

#: where the datasets are without ``--data-root``
DATA_ROOT = "data"


class SpecSettings(Protocol):
    """The parsed ``key=value`` settings of a protocol: a dataclass (its fields are the keys)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


class SpecEvaluation(Protocol):
    """A row's evaluation, a frozen dataclass: its result file, everything that decides its
    numbers, and its stored result (None: not yet)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def output(self) -> Path: ...

    def settings(self) -> dict[str, Any]: ...

    def stored(self) -> Optional[dict[str, Any]]: ...


class ReleasedEvaluation(SpecEvaluation, Protocol):
    """The evaluation of a released model: its ``spec`` and the ``checkpoint`` file given for
    it (None: not given)."""

    @property
    def spec(self) -> FrozenSpec: ...

    @property
    def checkpoint(self) -> Optional[Path]: ...


SettingsT = TypeVar("SettingsT", bound=SpecSettings)
EvaluationT = TypeVar("EvaluationT", bound=SpecEvaluation)
ReleasedT = TypeVar("ReleasedT", bound=ReleasedEvaluation)
#: what a checked evaluation reads: its model file (None: a model trained from scratch)
FileT = TypeVar("FileT", bound=Optional[Path])


class SpecRunner(ABC, Generic[SettingsT, EvaluationT, FileT]):
    """What one protocol's rows are (module doc): a runner is stateless; what one call shares
    between its rows (models, datasets read) is in the ``memo`` it is given."""

    #: a row's status once it ran (:data:`~gspdml.workflows.reproduce.report.RAN`)
    status = "evaluated"
    #: the ``--dry-run`` columns between "Row" and "Result" (:meth:`cells`)
    columns: tuple[str, ...] = ()
    #: how the evaluations work, the last words of ``--dry-run`` before the settings
    how = ""
    #: the protocol's settings: a dataclass whose fields are the ``key=value`` keys
    settings_type: type[SettingsT]

    def parse(self, overrides: Sequence[str], protocol: str) -> SettingsT:
        """The settings of ``protocol`` from ``key=value`` strings
        (:func:`~gspdml.workflows.reproduce.settings.parse_settings`)."""
        return parse_settings(self.settings_type, overrides, protocol)

    @abstractmethod
    def evaluation(
        self, table: Table, row: Row, settings: SettingsT, data: Path, folder: Path
    ) -> Optional[EvaluationT]:
        """``row``'s evaluation, its data under ``data`` and its result in ``folder``
        (:func:`result_file`); None for a row that does not run (listed with its reason)."""

    @abstractmethod
    def checked(self, evaluation: EvaluationT, where: str) -> FileT:
        """The model file ``evaluation`` reads, or a ConfigError saying which file ``where``
        (``"row R of TABLE"``) needs and how to give it."""

    @abstractmethod
    def compute(
        self, evaluation: EvaluationT, file: FileT, settings: SettingsT, memo: dict[Any, Any]
    ) -> dict[str, Any]:
        """The result of ``evaluation`` with the model of ``file``, computed now."""

    @abstractmethod
    def cells(self, evaluation: EvaluationT) -> list[Any]:
        """The ``--dry-run`` line of ``evaluation`` under :attr:`columns`."""

    def shown(self, table: Table, row: Row) -> Optional[set[str]]:
        """The titles of the columns ``row``'s result fills (None: every column whose metric
        it holds)."""
        return None

    def benchmark(self, result: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
        """The count check of the data a result read (None: none; one that is not the
        benchmark's gives no verdict)."""
        return None


class ReleasedRunner(SpecRunner[SettingsT, ReleasedT, Path]):
    """The runner of a protocol whose every runnable row evaluates a released model
    (:attr:`~gspdml.workflows.reproduce.registry.Row.frozen`), stored under the file's name and
    the pooling (:meth:`~gspdml.workflows.reproduce.frozen_spec.FrozenSpec.result_stem`)."""

    @abstractmethod
    def draft(
        self, table: Table, row: Row, spec: FrozenSpec, settings: SettingsT, data: Path
    ) -> ReleasedT:
        """``row``'s evaluation of ``spec``, its data under ``data``; its ``output`` is
        decided by its settings (:func:`result_file`)."""

    @abstractmethod
    def data_cells(self, evaluation: ReleasedT) -> list[Any]:
        """The ``--dry-run`` cells of ``evaluation`` after its model and checkpoint."""

    def evaluation(
        self, table: Table, row: Row, settings: SettingsT, data: Path, folder: Path
    ) -> Optional[ReleasedT]:
        if row.frozen is None:
            return None
        draft = self.draft(table, row, row.frozen, settings, data)
        output = result_file(folder, row.frozen.result_stem(), draft.settings())
        return replace(draft, output=output)

    def checked(self, evaluation: ReleasedT, where: str) -> Path:
        return evaluation.spec.given_file(evaluation.checkpoint, where)

    def cells(self, evaluation: ReleasedT) -> list[Any]:
        spec = evaluation.spec
        needs = checkpoint_needs(evaluation.checkpoint, spec.url)
        return [spec.describe(), needs, *self.data_cells(evaluation)]


def result_file(folder: Path, stem: str, settings: Mapping[str, Any]) -> Path:
    """The file of an evaluation's result: ``<folder>/<stem>-<key>.json``, ``key`` hashing its
    ``settings``, so that other settings get another file and the same ones reuse it."""
    return folder / f"{stem}-{cache_key(settings)}.json"


def _row_name(row: Row, table: Table) -> str:
    return f"row {row.key} of {table.key}"


def plan_spec(
    runner: SpecRunner[SettingsT, EvaluationT, FileT],
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> tuple[SettingsT, list[EvaluationPlan[EvaluationT]]]:
    """The settings, and the selected rows of ``table`` with their evaluations (module doc,
    steps 1 and 2)."""
    settings = runner.parse(overrides, table.protocol)
    data = Path(data_root or DATA_ROOT).expanduser().resolve()
    output = Path(output_dir or DEFAULT_OUTPUT) / table.protocol
    plans = []
    for row in select_rows(table, rows):
        evaluation = runner.evaluation(table, row, settings, data, output / row.dataset)
        plans.append(EvaluationPlan(row, () if evaluation is None else (evaluation,)))
    return settings, plans


def reproduce_spec(
    runner: SpecRunner[SettingsT, EvaluationT, FileT],
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> dict[str, Any]:
    """Run the selected rows of ``table`` by ``runner`` (module doc) and write the table;
    returns its JSON payload (``rows``: one entry per row of the table, in its order)."""
    settings, plans = plan_spec(
        runner, table, rows=rows, data_root=data_root, overrides=overrides, output_dir=output_dir
    )
    check_unstored(plans, lambda evaluation, row: runner.checked(evaluation, _row_name(row, table)))
    memo: dict[Any, Any] = {}

    def run(plan: EvaluationPlan[EvaluationT]) -> dict[str, Any]:
        (evaluation,) = plan.evaluations
        result = evaluation.stored()
        if result is None:
            file = runner.checked(evaluation, _row_name(plan.row, table))
            result = runner.compute(evaluation, file, settings, memo)
            store_result(evaluation.output, evaluation.settings(), result)
        ours = scaled_ours(table, result, runner.shown(table, plan.row))
        runs = {plan.row.dataset: str(evaluation.output)}
        benchmark = runner.benchmark(result)
        return row_entry(table, plan.row, runner.status, ours, runs, 1, benchmark=benchmark)

    entries = table_entries(table, plans, run)
    return evaluation_payload(table, entries, overrides, data_root, output_dir)


def spec_dry_run_markdown(
    runner: SpecRunner[SettingsT, EvaluationT, FileT],
    table: Table,
    plans: Sequence[EvaluationPlan[EvaluationT]],
) -> str:
    """``--dry-run`` of ``table`` (``plans``: :func:`plan_spec`): every evaluation of the
    selected rows, what it needs (:meth:`SpecRunner.cells`), its result file and whether that
    is stored already."""
    header = ["Row", *runner.columns, "Result", "State"]
    body: list[list[Any]] = []
    for plan in plans:
        if not plan.evaluations:
            body.append([plan.row.key, plan.row.status, *[""] * (len(header) - 2)])
        for evaluation in plan.evaluations:
            state = "stored" if evaluation.stored() is not None else "to run"
            cells = runner.cells(evaluation)
            body.append([plan.row.key, *cells, str(evaluation.output), state])
    keys = ", ".join(f.name for f in fields(runner.settings_type))
    return evaluations_markdown(
        table, plans, header, body, f"{runner.how} Settings key=value: {keys}."
    )


def checkpoint_needs(file: Optional[Path], url: str) -> str:
    """A ``--dry-run`` cell: the released file an evaluation reads, or what it needs (the file
    is published at ``url``)."""
    if file is None:
        return f"needs checkpoints=DIR or checkpoint=PATH ({url})"
    return str(file) if file.is_file() else f"{file} (missing; {url})"

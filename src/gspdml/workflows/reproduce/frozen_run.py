"""``gspdml reproduce`` of a table of released pre-trained models evaluated without fine-tuning
(protocol ``frozen``): every runnable row is a pinned model
(:class:`~gspdml.workflows.reproduce.frozen_spec.FrozenSpec`) whose features of a dataset's test
images are ranked by nearest-neighbour search, nothing trained.

Protocol (Psomas thesis §3.4.3, "Fine-grained classification", following Kakogeorgiou et al.,
"What to hide from your students", ECCV 2022): the zero-shot test split of each dataset
(:mod:`gspdml.data`: CUB-200-2011 and Cars196 the second half of the classes, SOP
``Ebay_test.txt``, In-Shop query and gallery), images resized to 256 on the shorter side and
center-cropped to 224, ImageNet normalisation; the embedding is the pooled feature,
L2-normalised; Recall@K by the library's one evaluation (:func:`gspdml.evaluation.service.evaluate`):
leave-one-out on CUB, Cars and SOP, query -> gallery on In-Shop.

Inputs. ``--data-root DIR`` (default ``data``) holds the datasets in their official layouts
(``CUB_200_2011``, ``cars196``, ``Stanford_Online_Products``, ``InShop``). The settings
``key=value`` (:class:`FrozenSettings`) name the model files: ``checkpoints=DIR`` a folder
holding the released files under their published names (each row finds its own), or
``checkpoint=PATH`` one file for every selected row (select the rows of one model with
``--rows``); ``device``, ``batch_size``, ``resize`` and ``crop``.

Results. Each (row, dataset) evaluation is stored in
``<output_dir>/frozen/<dataset>/<checkpoint stem>-<pooling>-<key>.json``, ``key`` hashing
:meth:`FrozenEvaluation.settings` (the checkpoint by its content), and reused when checked valid
(:func:`~gspdml.workflows.reproduce.report.stored_result`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from gspdml.data.cache import cache_key
from gspdml.workflows.reproduce.frozen_spec import FrozenSpec
from gspdml.workflows.reproduce.registry import Row, Table, select_rows
from gspdml.workflows.reproduce.report import (
    DEFAULT_OUTPUT,
    EvaluationPlan,
    check_unstored,
    content_of,
    evaluation_payload,
    evaluations_markdown,
    number_problem,
    row_entry,
    scaled_ours,
    store_result,
    stored_result,
    table_entries,
)
from gspdml.workflows.reproduce.settings import parse_settings

if TYPE_CHECKING:
    from gspdml.models.embedder import Embedder

DATA_ROOT = "data"
#: a row's dataset -> (the reader of :mod:`gspdml.data`, its folder under ``--data-root``)
DATASETS = {
    "cub": ("cub200", "CUB_200_2011"),
    "cars": ("cars196", "cars196"),
    "sop": ("sop", "Stanford_Online_Products"),
    "inshop": ("inshop", "InShop"),
}


@dataclass(frozen=True)
class FrozenSettings:
    """The ``key=value`` settings of a ``frozen`` table (module doc): ``checkpoints`` a folder
    of released files under their published names, ``checkpoint`` one file for every selected
    row; the test images resized to ``resize`` and center-cropped to ``crop``."""

    checkpoints: Optional[str] = None
    checkpoint: Optional[str] = None
    device: str = "cpu"
    batch_size: int = 64
    resize: int = 256
    crop: int = 224

    @classmethod
    def parse(cls, overrides: Sequence[str]) -> FrozenSettings:
        return parse_settings(cls, overrides, "frozen")

    def checkpoint_of(self, spec: FrozenSpec) -> Optional[Path]:
        """The file of ``spec``'s model: ``checkpoint``, else ``checkpoints/<released name>``;
        None when neither is given."""
        if self.checkpoint is not None:
            return Path(self.checkpoint).expanduser().resolve()
        if self.checkpoints is not None:
            return (Path(self.checkpoints).expanduser() / spec.checkpoint).resolve()
        return None


@dataclass(frozen=True)
class FrozenEvaluation:
    """One dataset of a row as it runs: the row's model, its ``checkpoint`` file (None: not
    given), the dataset's ``folder``, the image sizes, and the result file ``output``."""

    dataset: str
    spec: FrozenSpec
    checkpoint: Optional[Path]
    folder: Path
    resize: int
    crop: int
    recall_at: tuple[int, ...]
    output: Path

    def settings(self) -> dict[str, Any]:
        """Everything that decides the numbers, as stored beside them."""
        return {
            "dataset": self.dataset,
            "model": self.spec.describe(),
            "gamma": self.spec.gamma,
            "checkpoint": content_of(self.checkpoint),
            "data": str(self.folder),
            "resize": self.resize,
            "crop": self.crop,
            "recall_at": list(self.recall_at),
        }

    def stored(self) -> Optional[dict[str, Any]]:
        return stored_result(self.output, self.settings(), self.result_problem)

    def result_problem(self, result: dict[str, Any]) -> Optional[str]:
        """What is wrong with a stored ``result`` (None: nothing): it holds exactly the
        ``recall_at_<K>`` of :attr:`recall_at`, each a fraction in [0, 1]."""
        keys = {f"recall_at_{k}" for k in self.recall_at}
        if set(result) != keys:
            return f"fields {sorted(result)}, expected {sorted(keys)}"
        return next(filter(None, (number_problem(result, key, 1.0) for key in sorted(keys))), None)

    def split(self) -> Any:
        """The dataset's test split (:class:`~gspdml.data.base.EvalSplit`) read as evaluated."""
        from gspdml.data import DATASETS as READERS

        reader, _ = DATASETS[self.dataset]
        spec: dict[str, Any] = {
            "name": reader,
            "root": str(self.folder),
            "transform": "center",
            "val_fraction": 0.0,
        }
        spec.update(resize=self.resize, crop=self.crop)
        return READERS.build(spec, "data.dataset", seed=0).test


#: a row of the table with its evaluations
FrozenRowPlan = EvaluationPlan[FrozenEvaluation]


def _recall_at(table: Table, row: Row) -> tuple[int, ...]:
    """The K of the columns the paper printed for ``row``."""
    metrics = {c.title: c.metric for c in table.columns}
    return tuple(sorted(int(metrics[title].removeprefix("recall_at_")) for title in row.paper))


def plan_frozen(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> list[FrozenRowPlan]:
    """The selected rows of a ``frozen`` table with their evaluations."""
    settings = FrozenSettings.parse(overrides)
    data = Path(data_root or DATA_ROOT).expanduser().resolve()
    output = Path(output_dir or DEFAULT_OUTPUT) / "frozen"
    plans = []
    for row in select_rows(table, rows):
        spec = row.frozen
        if spec is None:
            plans.append(FrozenRowPlan(row))
            continue
        folder = data / DATASETS[row.dataset][1]
        recall_at = _recall_at(table, row)
        draft = FrozenEvaluation(
            row.dataset,
            spec,
            settings.checkpoint_of(spec),
            folder,
            settings.resize,
            settings.crop,
            recall_at,
            Path(),
        )
        stem = Path(spec.checkpoint).name.split(".")[0]
        name = f"{stem}-{spec.pooling}-{cache_key(draft.settings())}.json"
        plans.append(FrozenRowPlan(row, (replace(draft, output=output / row.dataset / name),)))
    return plans


def _checked(evaluation: FrozenEvaluation, row: Row, table: Table) -> Path:
    """The evaluation's checkpoint file, or a ConfigError saying which file to give."""
    return evaluation.spec.given_file(evaluation.checkpoint, f"row {row.key} of {table.key}")


def _evaluate(
    evaluation: FrozenEvaluation,
    row: Row,
    table: Table,
    settings: FrozenSettings,
    models: dict[tuple[Path, FrozenSpec], Embedder],
) -> dict[str, float]:
    """The R@K of ``evaluation`` (fractions): the stored ones, or evaluated now and stored
    (``models``: the models loaded so far, by file and spec)."""
    from gspdml.evaluation.service import EvalSpec, evaluate
    from gspdml.models.simpool_release import released_embedder

    stored = evaluation.stored()
    if stored is not None:
        return stored
    file = _checked(evaluation, row, table)
    spec = evaluation.spec
    if (file, spec) not in models:
        models[file, spec] = released_embedder(
            file,
            spec.pooling,
            backbone=spec.backbone,
            gamma=spec.gamma,
            pooled_norm=spec.pooled_norm,
        )
    report = evaluate(
        models[file, spec],
        evaluation.split(),
        EvalSpec(metrics=("recall_at",), recall_at=evaluation.recall_at),
        device=settings.device,
        precision="fp32",
        batch_size=settings.batch_size,
    )
    result = {
        f"recall_at_{k}": float(report.metrics[f"recall_at_{k}"]) for k in evaluation.recall_at
    }
    store_result(evaluation.output, evaluation.settings(), result)
    return result


def reproduce_frozen(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> dict[str, Any]:
    """Evaluate the selected rows of a ``frozen`` table (module doc) and write the table;
    returns its JSON payload (``rows``: one entry per row of the table, in its order)."""
    settings = FrozenSettings.parse(overrides)
    plans = plan_frozen(
        table, rows=rows, data_root=data_root, overrides=overrides, output_dir=output_dir
    )
    check_unstored(plans, lambda evaluation, row: _checked(evaluation, row, table))
    models: dict[tuple[Path, FrozenSpec], Embedder] = {}

    def run(plan: FrozenRowPlan) -> dict[str, Any]:
        (evaluation,) = plan.evaluations
        result = _evaluate(evaluation, plan.row, table, settings, models)
        ours = scaled_ours(table, result)
        runs = {plan.row.dataset: str(evaluation.output)}
        return row_entry(table, plan.row, "evaluated", ours, runs, 1)

    entries = table_entries(table, plans, run)
    return evaluation_payload(table, entries, overrides, data_root, output_dir)


def frozen_dry_run_markdown(table: Table, plans: Sequence[FrozenRowPlan]) -> str:
    """``--dry-run`` of a ``frozen`` table: every evaluation of the selected rows, the file it
    needs (and where it is published) and whether its result is stored already."""
    body: list[list[Any]] = []
    for plan in plans:
        if not plan.evaluations:
            body.append([plan.row.key, plan.row.status, *[""] * 5])
        for evaluation in plan.evaluations:
            spec, file = evaluation.spec, evaluation.checkpoint
            if file is None:
                needs = f"needs checkpoints=DIR or checkpoint=PATH ({spec.url})"
            else:
                needs = str(file) if file.is_file() else f"{file} (missing; {spec.url})"
            state = "stored" if evaluation.stored() is not None else "to run"
            recalls = ", ".join(f"R@{k}" for k in evaluation.recall_at)
            body.append(
                [plan.row.key, spec.describe(), needs, str(evaluation.folder), recalls]
                + [str(evaluation.output), state]
            )
    header = ["Row", "Model", "Checkpoint", "Data", "Metrics", "Result", "State"]
    how = (
        "Nothing trains: each evaluation embeds the dataset's test images once with the "
        "released model and ranks them by nearest-neighbour search. Settings key=value: "
        + ", ".join(f.name for f in fields(FrozenSettings))
        + "."
    )
    return evaluations_markdown(table, plans, header, body, how)

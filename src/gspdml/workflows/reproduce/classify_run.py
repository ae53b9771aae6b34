"""``gspdml reproduce`` of a supervised classification table (protocol ``classify``: Psomas thesis
Table 3.4, fine-tuning released ViT-S models, and Table 3.12, ResNet-18 with each pooling variant
on ImageNet-20%): every runnable row trains one classifier
(:class:`~gspdml.workflows.reproduce.classify_spec.ClassifySpec`,
:func:`gspdml.workflows.classification.train_classifier`) and reports its top-1 on the test split.

Inputs. ``--data-root DIR`` (default ``data``) holds each row's dataset in its official layout
under the row's folder (``cifar-10-batches-py``, ``cifar-100-python``, ``flowers102``: ``jpg/``,
``imagelabels.mat``, ``setid.mat``; ``imagenet``: ``train/<class>/``, ``val/<class>/``). The
settings ``key=value`` (:class:`ClassifySettings`): ``checkpoints=DIR`` (the released files
under their published names) or ``checkpoint=PATH`` for the fine-tuning rows, ``device``,
``workers``, and, to shorten a run (smoke tests, small machines), ``epochs``, ``batch_size``,
``resize`` and ``crop`` in place of the row's.

Results. A row trains in ``<output_dir>/classify/<dataset>/<label>-<key>/`` (resumed after its
last finished epoch, :mod:`gspdml.workflows.classification`) and stores its top-1 in the
``.json`` of the same name, ``key`` hashing :meth:`ClassifyRun.settings`; a stored result of the
same settings is reused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Optional, cast

from gspdml.data.cache import cache_key
from gspdml.errors import ConfigError
from gspdml.workflows.classification import ClassificationRecipe
from gspdml.workflows.reproduce.classify_spec import ClassifySpec
from gspdml.workflows.reproduce.registry import Row, Table, select_rows
from gspdml.workflows.reproduce.report import (
    DEFAULT_OUTPUT,
    EvaluationPlan,
    Ours,
    check_unstored,
    content_of,
    evaluation_payload,
    evaluations_markdown,
    number_problem,
    row_entry,
    store_result,
    stored_result,
    table_entries,
)
from gspdml.workflows.reproduce.settings import parse_settings

DATA_ROOT = "data"


@dataclass(frozen=True)
class ClassifySettings:
    """The ``key=value`` settings of a ``classify`` table (module doc); an int setting left at
    0 keeps the row's value."""

    checkpoints: Optional[str] = None
    checkpoint: Optional[str] = None
    device: str = "cpu"
    workers: int = 0
    epochs: int = 0
    batch_size: int = 0
    resize: int = 0
    crop: int = 0

    @classmethod
    def parse(cls, overrides: Sequence[str]) -> ClassifySettings:
        return parse_settings(cls, overrides, "classify")

    def checkpoint_of(self, spec: ClassifySpec) -> Optional[Path]:
        """The released file a fine-tuning row starts from (None: not given, or a row trained
        from scratch)."""
        if spec.released is None:
            return None
        if self.checkpoint is not None:
            return Path(self.checkpoint).expanduser().resolve()
        if self.checkpoints is not None:
            return (Path(self.checkpoints).expanduser() / spec.released.checkpoint).resolve()
        return None

    def applied(self, spec: ClassifySpec) -> ClassifySpec:
        """``spec`` with the sizes these settings give in place of its own."""
        recipe = spec.recipe
        recipe = replace(recipe, epochs=self.epochs or recipe.epochs)
        recipe = replace(recipe, batch_size=self.batch_size or recipe.batch_size)
        return replace(
            spec, recipe=recipe, resize=self.resize or spec.resize, crop=self.crop or spec.crop
        )


@dataclass(frozen=True)
class ClassifyRun:
    """One row as it trains: its ``spec`` (settings applied), the released ``checkpoint`` it
    starts from (None: from scratch, or not given), the dataset ``folder`` and the result file
    ``output`` (the run folder beside it, same stem)."""

    spec: ClassifySpec
    checkpoint: Optional[Path]
    folder: Path
    output: Path

    @property
    def run_dir(self) -> Path:
        return self.output.with_suffix("")

    def settings(self) -> dict[str, Any]:
        """Everything that decides the number, as stored beside it."""
        spec = self.spec
        return {
            "model": spec.describe(),
            "pooling": spec.pooling_spec() if spec.released is None else None,
            "checkpoint": content_of(self.checkpoint),
            "data": str(self.folder),
            "reader": spec.reader,
            "fraction": spec.fraction,
            "max_logits": spec.max_logits,
            "resize": spec.resize,
            "crop": spec.crop,
            "recipe": {f.name: getattr(spec.recipe, f.name) for f in fields(ClassificationRecipe)},
        }

    def stored(self) -> Optional[dict[str, Any]]:
        return stored_result(self.output, self.settings(), self.result_problem)

    @staticmethod
    def result_problem(result: dict[str, Any]) -> Optional[str]:
        """What is wrong with a stored ``result`` (None: nothing): exactly ``top1``, in [0, 1]."""
        if set(result) != {"top1"}:
            return f"fields {sorted(result)}, expected ['top1']"
        return number_problem(result, "top1", 1.0)


ClassifyRowPlan = EvaluationPlan[ClassifyRun]


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", label).strip("_")


def plan_classify(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> list[ClassifyRowPlan]:
    """The selected rows of a ``classify`` table with their runs."""
    settings = ClassifySettings.parse(overrides)
    data = Path(data_root or DATA_ROOT).expanduser().resolve()
    output = Path(output_dir or DEFAULT_OUTPUT) / "classify"
    plans = []
    for row in select_rows(table, rows):
        if row.classify is None:
            plans.append(ClassifyRowPlan(row))
            continue
        spec = settings.applied(row.classify)
        draft = ClassifyRun(spec, settings.checkpoint_of(spec), data / spec.folder, Path())
        name = f"{_slug(row.label)}-{cache_key(draft.settings())}.json"
        plans.append(ClassifyRowPlan(row, (replace(draft, output=output / row.dataset / name),)))
    return plans


def _checked(run: ClassifyRun, row: Row, table: Table) -> None:
    """A ConfigError naming the file to give when a fine-tuning row's checkpoint is absent."""
    released, file = run.spec.released, run.checkpoint
    if released is not None and (file is None or not file.is_file()):
        given = "" if file is None else f"{file} does not exist; "
        raise ConfigError(
            "checkpoint",
            f"row {row.key} of {table.key} fine-tunes the released {released.checkpoint}: "
            f"{given}download it from {released.url} and give checkpoints=DIR (the folder "
            "holding it) or checkpoint=PATH, or leave the row out with --rows",
        )


def _train(run: ClassifyRun, settings: ClassifySettings) -> float:
    """The top-1 (a fraction) of the row's classifier: stored, or trained now and stored."""
    from gspdml.data.classification import classification_splits, classification_transforms
    from gspdml.models.backbones import build_backbone
    from gspdml.models.backbones.base import Backbone
    from gspdml.models.simpool_release import released_embedder
    from gspdml.pooling import build_pooling
    from gspdml.workflows.classification import Classifier, train_classifier

    stored = run.stored()
    if stored is not None:
        return float(stored["top1"])
    spec = run.spec
    train_transform, test_transform = classification_transforms(spec.resize, spec.crop)
    data = classification_splits(
        spec.reader, run.folder, train_transform, test_transform, fraction=spec.fraction
    )
    if spec.released is not None:
        assert run.checkpoint is not None  # _checked
        released = spec.released
        embedder = released_embedder(
            run.checkpoint,
            released.pooling,
            backbone=released.backbone,
            gamma=released.gamma,
            pooled_norm=released.pooled_norm,
        )
        backbone = cast(Backbone, embedder.backbone)
        pooling, norm = embedder.pooling, embedder.pooled_norm
    else:
        backbone = build_backbone({"name": spec.network}, 3)
        pooling = build_pooling(spec.pooling_spec(), in_channels=backbone.out_channels)
        norm = None
    width, classes = backbone.out_channels, data.num_classes
    model = Classifier(backbone, pooling, width, classes, norm, max_logits=spec.max_logits)
    top1 = train_classifier(
        model,
        data.train,
        data.test,
        spec.recipe,
        run.run_dir,
        run.settings(),
        device=settings.device,
        workers=settings.workers,
    )
    store_result(run.output, run.settings(), {"top1": top1})
    return top1


def reproduce_classify(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> dict[str, Any]:
    """Train the selected rows of a ``classify`` table (module doc) and write the table;
    returns its JSON payload (``rows``: one entry per row of the table, in its order)."""
    settings = ClassifySettings.parse(overrides)
    plans = plan_classify(
        table, rows=rows, data_root=data_root, overrides=overrides, output_dir=output_dir
    )
    check_unstored(plans, lambda planned, row: _checked(planned, row, table))

    def run(plan: ClassifyRowPlan) -> dict[str, Any]:
        (planned,) = plan.evaluations
        top1 = _train(planned, settings)
        ours: dict[str, Ours] = {
            column.title: (column.scale * top1, None)
            if column.title in plan.row.paper
            else (None, None)
            for column in table.columns
        }
        runs = {plan.row.dataset: str(planned.output)}
        return row_entry(table, plan.row, "evaluated", ours, runs, 1)

    entries = table_entries(table, plans, run)
    return evaluation_payload(table, entries, overrides, data_root, output_dir)


def classify_dry_run_markdown(table: Table, plans: Sequence[ClassifyRowPlan]) -> str:
    """``--dry-run`` of a ``classify`` table: each selected row's classifier, the data and
    checkpoint it needs and whether its result is stored already."""
    body: list[list[Any]] = []
    for plan in plans:
        if not plan.evaluations:
            body.append([plan.row.key, plan.row.status, *[""] * 4])
        for run in plan.evaluations:
            released, file = run.spec.released, run.checkpoint
            if released is None:
                needs = "– (trained from scratch)"
            elif file is None:
                needs = f"needs checkpoints=DIR or checkpoint=PATH ({released.url})"
            else:
                needs = str(file) if file.is_file() else f"{file} (missing; {released.url})"
            state = "stored" if run.stored() is not None else "to run"
            body.append(
                [plan.row.key, run.spec.describe(), needs, str(run.folder), str(run.output), state]
            )
    header = ["Row", "Model", "Checkpoint", "Data", "Result", "State"]
    how = (
        "Each runnable row trains a classifier (backbone, pooling, linear layer; cross-entropy) "
        "on the training split and reports top-1 on the test split. Settings key=value: "
        + ", ".join(f.name for f in fields(ClassifySettings))
        + "."
    )
    return evaluations_markdown(table, plans, header, body, how)

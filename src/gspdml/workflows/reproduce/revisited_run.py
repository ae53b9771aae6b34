"""``gspdml reproduce`` of a table of released pre-trained models on the revisited Oxford and
Paris benchmarks (protocol ``revisited``; Psomas thesis Table 3.8): every runnable row is a
pinned released model (:class:`~gspdml.workflows.reproduce.frozen_spec.FrozenSpec`, read by
:func:`gspdml.models.simpool_release.released_embedder`) whose features of the queries are
ranked against those of the database, nothing trained.

Protocol. Psomas thesis §3.4.3 ("Image retrieval") extracts features of the DINO ResNet-50 and
ViT-S "without fine-tuning" and reports mAP on ROxford and RParis (Radenović et al., CVPR
2018); it names no scale, so the evaluation is single scale, as DINO's
``eval_image_retrieval.py`` runs by default: each image (a query cropped to its box, as the
official revisitop example does; the database images whole, :mod:`gspdml.data.revisited`) is
shrunk to at most ``imsize`` pixels on its longer side (224, that script's default), aspect
ratio kept, ImageNet-normalised and embedded alone at its own size (a ViT's position embeddings
interpolated to its grid); the embedding is the pooled feature, L2-normalised, and the score
of a query and a database image their inner product. The Easy, Medium and Hard mAP are those of
:mod:`gspdml.evaluation.revisited` (junk images, and per protocol the easy or hard ones, left
out of the ranking).

Inputs. ``--data-root DIR`` (default ``data``) holds ``roxford5k/`` and ``rparis6k/`` in the
official layout. Settings ``key=value`` (:class:`RevisitedSettings`): ``checkpoints=DIR`` (the
released files under their published names) or ``checkpoint=PATH`` (one file for every selected
row), ``device``, ``imsize``.

Results. Each row's evaluation is stored in
``<output_dir>/revisited/<dataset>/<checkpoint stem>-<pooling>-<key>.json`` (``key`` hashing
:meth:`RevisitedEvaluation.settings`, the checkpoint by its content) with the counts of the
release read, and reused when checked valid
(:func:`~gspdml.workflows.reproduce.report.stored_result`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Optional

from gspdml.data.cache import cache_key
from gspdml.errors import ConfigError
from gspdml.workflows.reproduce.frozen_run import DATA_ROOT, FrozenSettings
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

#: the protocols of :mod:`gspdml.evaluation.revisited` and the result field of each
MAP_FIELDS = {"easy": "map_easy", "medium": "map_medium", "hard": "map_hard"}
#: the longer side of the single scale (DINO's ``eval_image_retrieval.py`` default)
IMSIZE = 224


@dataclass(frozen=True)
class RevisitedSettings:
    """The ``key=value`` settings of a ``revisited`` table (module doc)."""

    checkpoints: Optional[str] = None
    checkpoint: Optional[str] = None
    device: str = "cpu"
    imsize: int = IMSIZE

    @classmethod
    def parse(cls, overrides: Sequence[str]) -> RevisitedSettings:
        return parse_settings(cls, overrides, "revisited")

    def checkpoint_of(self, spec: FrozenSpec) -> Optional[Path]:
        """The file of ``spec``'s model (:meth:`FrozenSettings.checkpoint_of`)."""
        return FrozenSettings(self.checkpoints, self.checkpoint).checkpoint_of(spec)


@dataclass(frozen=True)
class RevisitedEvaluation:
    """A row as it runs: its model, the ``checkpoint`` file (None: not given), the data
    ``root`` holding the release ``dataset``, the single scale and the result file."""

    dataset: str
    spec: FrozenSpec
    checkpoint: Optional[Path]
    root: Path
    imsize: int
    output: Path

    def settings(self) -> dict[str, Any]:
        """Everything that decides the numbers, as stored beside them."""
        return {
            "dataset": self.dataset,
            "model": self.spec.describe(),
            "gamma": self.spec.gamma,
            "checkpoint": content_of(self.checkpoint),
            "data": str(self.root / self.dataset),
            "imsize": self.imsize,
            "queries": "cropped to their box",
        }

    def stored(self) -> Optional[dict[str, Any]]:
        return stored_result(self.output, self.settings(), self.result_problem)

    def result_problem(self, result: dict[str, Any]) -> Optional[str]:
        """What is wrong with a stored ``result`` (None: nothing): the three mAP, fractions in
        [0, 1], and the counts of the release (:meth:`RevisitedRelease.counts`)."""
        keys = {*MAP_FIELDS.values(), "counts"}
        if set(result) != keys or not isinstance(result["counts"], dict):
            return f"fields {sorted(result)}, expected {sorted(keys)}"
        if not isinstance(result["counts"].get("is_benchmark"), bool):
            return "'counts' has no is_benchmark"
        maps = sorted(MAP_FIELDS.values())
        return next(filter(None, (number_problem(result, key, 1.0) for key in maps)), None)


RevisitedRowPlan = EvaluationPlan[RevisitedEvaluation]


def plan_revisited(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> list[RevisitedRowPlan]:
    """The selected rows of a ``revisited`` table with their evaluations."""
    settings = RevisitedSettings.parse(overrides)
    root = Path(data_root or DATA_ROOT).expanduser().resolve()
    output = Path(output_dir or DEFAULT_OUTPUT) / "revisited"
    plans = []
    for row in select_rows(table, rows):
        spec = row.frozen
        if spec is None:
            plans.append(RevisitedRowPlan(row))
            continue
        file = settings.checkpoint_of(spec)
        draft = RevisitedEvaluation(row.dataset, spec, file, root, settings.imsize, Path())
        stem = Path(spec.checkpoint).name.split(".")[0]
        name = f"{stem}-{spec.pooling}-{cache_key(draft.settings())}.json"
        evaluation = replace(draft, output=output / row.dataset / name)
        plans.append(RevisitedRowPlan(row, (evaluation,)))
    return plans


def _checked(evaluation: RevisitedEvaluation, row: Row, table: Table) -> Path:
    """The evaluation's checkpoint file, or a ConfigError saying which file to give."""
    file, spec = evaluation.checkpoint, evaluation.spec
    if file is None or not file.is_file():
        given = "" if file is None else f"{file} does not exist; "
        raise ConfigError(
            "checkpoint",
            f"row {row.key} of {table.key} evaluates the released {spec.checkpoint}: {given}"
            f"download it from {spec.url} and give checkpoints=DIR (the folder holding it) or "
            "checkpoint=PATH, or leave the row out with --rows",
        )
    return file


def revisited_maps(
    evaluation: RevisitedEvaluation, checkpoint: Path, device: str
) -> dict[str, Any]:
    """The Easy, Medium and Hard mAP (fractions) of ``evaluation`` with the model of
    ``checkpoint`` (module doc), and the counts of the release it read."""
    import torch

    from gspdml.data.revisited import RevisitedImages, read_revisited
    from gspdml.evaluation.revisited import revisited_map
    from gspdml.models.simpool_release import released_embedder

    release = read_revisited(evaluation.root, evaluation.dataset)
    spec = evaluation.spec
    model = released_embedder(
        checkpoint,
        spec.pooling,
        backbone=spec.backbone,
        gamma=spec.gamma,
        pooled_norm=spec.pooled_norm,
        any_size=True,
    ).to(device)

    def embed(images: RevisitedImages) -> torch.Tensor:
        with torch.no_grad():
            rows = [model(images[i][None].to(device)).embedding.cpu() for i in range(len(images))]
        return torch.cat(rows).double()

    queries = embed(RevisitedImages(release.queries, release.boxes, evaluation.imsize))
    database = embed(RevisitedImages(release.database, None, evaluation.imsize))
    scores = queries @ database.T
    result: dict[str, Any] = {
        field: revisited_map(scores, release.ground_truth, protocol)
        for protocol, field in MAP_FIELDS.items()
    }
    result["counts"] = release.counts()
    return result


def reproduce_revisited(
    table: Table,
    *,
    rows: Sequence[str] = (),
    data_root: Optional[str] = None,
    overrides: Sequence[str] = (),
    output_dir: Optional[str] = None,
) -> dict[str, Any]:
    """Evaluate the selected rows of a ``revisited`` table (module doc) and write the table;
    returns its JSON payload (``rows``: one entry per row of the table, in its order)."""
    settings = RevisitedSettings.parse(overrides)
    plans = plan_revisited(
        table, rows=rows, data_root=data_root, overrides=overrides, output_dir=output_dir
    )
    check_unstored(plans, lambda evaluation, row: _checked(evaluation, row, table))

    def run(plan: RevisitedRowPlan) -> dict[str, Any]:
        (evaluation,) = plan.evaluations
        result = evaluation.stored()
        if result is None:
            file = _checked(evaluation, plan.row, table)
            result = revisited_maps(evaluation, file, settings.device)
            store_result(evaluation.output, evaluation.settings(), result)
        ours = scaled_ours(table, result)
        runs = {plan.row.dataset: str(evaluation.output)}
        counts = result["counts"]  # a smaller tree than the release: no verdict
        return row_entry(table, plan.row, "evaluated", ours, runs, 1, benchmark=counts)

    entries = table_entries(table, plans, run)
    return evaluation_payload(table, entries, overrides, data_root, output_dir)


def revisited_dry_run_markdown(table: Table, plans: Sequence[RevisitedRowPlan]) -> str:
    """``--dry-run`` of a ``revisited`` table: every evaluation of the selected rows, the file
    it needs and whether its result is stored already."""
    body: list[list[Any]] = []
    for plan in plans:
        if not plan.evaluations:
            body.append([plan.row.key, plan.row.status, *[""] * 4])
        for evaluation in plan.evaluations:
            spec, file = evaluation.spec, evaluation.checkpoint
            if file is None:
                needs = f"needs checkpoints=DIR or checkpoint=PATH ({spec.url})"
            else:
                needs = str(file) if file.is_file() else f"{file} (missing; {spec.url})"
            state = "stored" if evaluation.stored() is not None else "to run"
            data = str(evaluation.root / evaluation.dataset)
            body.append([plan.row.key, spec.describe(), needs, data, str(evaluation.output), state])
    header = ["Row", "Model", "Checkpoint", "Data", "Result", "State"]
    how = (
        "Nothing trains: each evaluation embeds the queries (cropped to their boxes) and the "
        "database once with the released model, at one scale, and ranks the database for each "
        "query; Easy, Medium and Hard mAP. Settings key=value: "
        + ", ".join(f.name for f in fields(RevisitedSettings))
        + "."
    )
    return evaluations_markdown(table, plans, header, body, how)

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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gspdml.workflows.reproduce.frozen_run import FrozenSettings
from gspdml.workflows.reproduce.frozen_spec import FrozenSpec
from gspdml.workflows.reproduce.registry import Row, Table
from gspdml.workflows.reproduce.report import content_of, number_problem, stored_result
from gspdml.workflows.reproduce.spec_run import ReleasedRunner

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


def revisited_maps(
    evaluation: RevisitedEvaluation, checkpoint: Path, device: str
) -> dict[str, Any]:
    """The Easy, Medium and Hard mAP (fractions) of ``evaluation`` with the model of
    ``checkpoint`` (module doc), and the counts of the release it read."""
    import torch

    from gspdml.data.revisited import RevisitedImages, read_revisited
    from gspdml.evaluation.revisited import revisited_map

    release = read_revisited(evaluation.root, evaluation.dataset)
    model = evaluation.spec.embedder(checkpoint, any_size=True).to(device)

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


class RevisitedRunner(ReleasedRunner[RevisitedSettings, RevisitedEvaluation]):
    """The ``revisited`` protocol (module doc) for :func:`~.spec_run.reproduce_spec`."""

    settings_type = RevisitedSettings
    columns = ("Model", "Checkpoint", "Data")
    how = (
        "Nothing trains: each evaluation embeds the queries (cropped to their boxes) and the "
        "database once with the released model, at one scale, and ranks the database for each "
        "query; Easy, Medium and Hard mAP."
    )

    def draft(
        self, table: Table, row: Row, spec: FrozenSpec, settings: RevisitedSettings, data: Path
    ) -> RevisitedEvaluation:
        file = settings.checkpoint_of(spec)
        return RevisitedEvaluation(row.dataset, spec, file, data, settings.imsize, Path())

    def compute(
        self,
        evaluation: RevisitedEvaluation,
        file: Path,
        settings: RevisitedSettings,
        memo: dict[Any, Any],
    ) -> dict[str, Any]:
        return revisited_maps(evaluation, file, settings.device)

    def data_cells(self, evaluation: RevisitedEvaluation) -> list[Any]:
        return [str(evaluation.root / evaluation.dataset)]

    def benchmark(self, result: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
        """The counts of the release read: a smaller tree than the release gets no verdict."""
        counts: Mapping[str, Any] = result["counts"]
        return counts


REVISITED = RevisitedRunner()

"""``gspdml reproduce`` of the tables that score released ViTs on tasks other than retrieval,
nothing trained: protocol ``localisation`` (Psomas thesis Table 3.5, MaxBoxAccV2 of the
attention maps on CUB and ImageNet-1k; Table 3.6, DINO-seg and LOST CorLoc on VOC07, VOC12 and COCO-20k:
:mod:`gspdml.evaluation.attention_localisation`) and protocol ``backgrounds`` (Table 3.7,
ImageNet-9 and its background variations: :mod:`gspdml.evaluation.background_robustness`, with
the classifier the supervised release carries, :mod:`gspdml.models.released_classifier`).

Inputs. ``--data-root DIR`` holds the datasets in their official layouts (:data:`DATASETS`:
``CUB_200_2011``, ``imagenet`` with ``LOC_val_solution.csv``, ``VOCdevkit`` with ``VOC2007``
and ``VOC2012``, ``COCO`` with COCO 2014 train and LOST's list of COCO-20k, ``bg_challenge``). The settings ``key=value`` (:class:`TaskSettings`):
``checkpoints=DIR`` (the released files under their published names) or ``checkpoint=PATH``,
``device``, ``batch_size``, ``size`` (the localisation images' side, 224), ``normalisation``
(``auto``: as each release was trained, :meth:`TaskSettings.normalisation_of`; ``imagenet``,
``inception``), ``head`` (the head of
the Baseline's [CLS] attention for MaxBoxAccV2: ``mean`` over the heads, the thesis' maps, or
its 0-based number) and ``seg_head`` (DINO-seg's head, 4 as in LOST's evaluation; ``mean``).

Results. Each (row, dataset) evaluation is stored in
``<output_dir>/<protocol>/<dataset>/<checkpoint stem>-<pooling>-<key>.json`` (``key`` hashing
:meth:`TaskEvaluation.settings`) and reused when valid
(:func:`~gspdml.workflows.reproduce.report.stored_result`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gspdml.errors import ConfigError, DataError
from gspdml.workflows.reproduce.frozen_run import FrozenSettings
from gspdml.workflows.reproduce.frozen_spec import FrozenSpec
from gspdml.workflows.reproduce.registry import Row, Table
from gspdml.workflows.reproduce.report import content_of, number_problem, stored_result
from gspdml.workflows.reproduce.settings import parse_settings
from gspdml.workflows.reproduce.spec_run import ReleasedRunner

#: a row's dataset -> (its task, its folder under ``--data-root``)
DATASETS = {
    "cub": ("maxboxacc", "CUB_200_2011"),
    "imagenet": ("maxboxacc", "imagenet"),
    "voc07": ("corloc", "VOCdevkit"),
    "voc12": ("corloc", "VOCdevkit"),
    "coco20k": ("corloc", "COCO"),
    "imagenet-9": ("backgrounds", "bg_challenge"),
}
#: the ``normalisation`` setting's values (:meth:`TaskSettings.normalisation_of`)
NORMALISED = ("auto", "imagenet", "inception")
#: the protocols this module runs
PROTOCOLS = ("localisation", "backgrounds")
#: the metrics a task stores
METRICS = {
    "maxboxacc": ("maxboxacc_v2", "maxboxacc_iou30", "maxboxacc_iou50", "maxboxacc_iou70"),
    "corloc": ("corloc",),
}


def _background_metrics() -> tuple[str, ...]:
    from gspdml.data.imagenet9 import VARIATIONS

    return (*(f"top1_{folder}" for folder in VARIATIONS.values()), "bg_gap")


@dataclass(frozen=True)
class TaskSettings:
    """The ``key=value`` settings of a ``localisation`` or ``backgrounds`` table (module doc)."""

    checkpoints: Optional[str] = None
    checkpoint: Optional[str] = None
    device: str = "cpu"
    batch_size: int = 32
    size: int = 224
    head: str = "mean"
    seg_head: str = "4"
    normalisation: str = "auto"

    @classmethod
    def parse(cls, overrides: Sequence[str], protocol: str) -> TaskSettings:
        settings = parse_settings(cls, overrides, protocol)
        for name in ("head", "seg_head"):
            settings.head_of(name)  # checked before any work
        if settings.normalisation not in NORMALISED:
            raise ConfigError(
                "normalisation",
                f"expected one of {list(NORMALISED)}, got {settings.normalisation!r}",
            )
        return settings

    def normalisation_of(self, row: Row) -> str:
        """The normalisation of ``row``'s images: ``auto`` is ``inception`` for the supervised
        release (trained by timm's script, whose ViT configs normalise by 0.5), ``imagenet``
        for the DINO release (DINO's transforms)."""
        if self.normalisation != "auto":
            return self.normalisation
        return "inception" if row.label.startswith("Supervised") else "imagenet"

    def head_of(self, name: str) -> Optional[int]:
        """The head setting ``name`` as a 0-based head, None for ``mean``."""
        value = getattr(self, name)
        if value == "mean":
            return None
        if not value.isdigit():
            raise ConfigError(name, f"expected mean or a head number 0, 1, ..; got {value!r}")
        return int(value)

    def checkpoint_of(self, spec: FrozenSpec) -> Optional[Path]:
        return FrozenSettings(self.checkpoints, self.checkpoint).checkpoint_of(spec)


@dataclass(frozen=True)
class TaskEvaluation:
    """One dataset of a row as it runs: the row's model, its ``checkpoint`` (None: not
    given), the dataset's ``folder``, what decides the numbers (``options``, among them the
    images' ``normalisation`` and a CorLoc row's ``method``), the result file ``output``."""

    dataset: str
    spec: FrozenSpec
    checkpoint: Optional[Path]
    folder: Path
    options: tuple[tuple[str, Any], ...]
    output: Path
    normalisation: str = "imagenet"
    method: str = ""

    @property
    def task(self) -> str:
        return DATASETS[self.dataset][0]

    @property
    def metrics(self) -> tuple[str, ...]:
        return METRICS.get(self.task) or _background_metrics()

    def settings(self) -> dict[str, Any]:
        """Everything that decides the numbers, as stored beside them."""
        return {
            "dataset": self.dataset,
            "task": self.task,
            "model": self.spec.describe(),
            "checkpoint": content_of(self.checkpoint),
            "data": str(self.folder),
            **dict(self.options),
        }

    def stored(self) -> Optional[dict[str, Any]]:
        return stored_result(self.output, self.settings(), self.result_problem)

    def result_problem(self, result: dict[str, Any]) -> Optional[str]:
        """What is wrong with a stored ``result`` (None: nothing): exactly :attr:`metrics`,
        each a fraction (the BG-gap in [-1, 1])."""
        if set(result) != set(self.metrics):
            return f"fields {sorted(result)}, expected {sorted(self.metrics)}"
        shifted = {k: (v + 1) / 2 if k == "bg_gap" and _real(v) else v for k, v in result.items()}
        return next(filter(None, (number_problem(shifted, k, 1.0) for k in self.metrics)), None)


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _corloc_method(row: Row) -> str:
    return row.label.split("/")[0].lower()


def _options(task: str, row: Row, settings: TaskSettings) -> tuple[tuple[str, Any], ...]:
    """What decides a task's numbers beside the model and the data; a CorLoc row's method is
    its label's first part (``DINO-seg/SimPool``, ``LOST/Baseline``)."""
    normalisation = ("normalisation", settings.normalisation_of(row))
    if task == "maxboxacc":
        return (("size", settings.size), ("head", settings.head), normalisation)
    if task == "corloc":
        method = _corloc_method(row)
        if method == "lost":
            return (("method", method), ("k", 100), normalisation)
        return (("method", method), ("seg_head", settings.seg_head), ("mass", 0.6), normalisation)
    return (("size", settings.size), normalisation)


def _compute(evaluation: TaskEvaluation, file: Path, settings: TaskSettings) -> dict[str, float]:
    """The evaluation's metrics, computed now (module doc)."""
    model = evaluation.spec.embedder(file)
    device, batch = settings.device, settings.batch_size
    normalisation = evaluation.normalisation
    if evaluation.task == "backgrounds":
        return _backgrounds(model, file, evaluation.folder, normalisation, settings)
    from gspdml.evaluation import attention_localisation as score

    items = _boxed_images(evaluation.dataset, evaluation.folder)
    if evaluation.task == "maxboxacc":
        head = settings.head_of("head")
        return score.maxboxacc_v2(
            model,
            items,
            size=settings.size,
            head=head,
            normalisation=normalisation,
            device=device,
            batch_size=batch,
        )
    return score.corloc(
        model,
        items,
        method=evaluation.method,
        head=settings.head_of("seg_head"),
        normalisation=normalisation,
        device=device,
    )


def _boxed_images(dataset: str, folder: Path) -> list[Any]:
    from gspdml.data.coco20k import read_coco20k_boxes
    from gspdml.data.cub_boxes import read_cub_boxes
    from gspdml.data.imagenet_boxes import read_imagenet_boxes
    from gspdml.data.voc import read_voc_boxes

    readers: dict[str, Callable[[], list[Any]]] = {
        "cub": lambda: read_cub_boxes(str(folder)),
        "imagenet": lambda: read_imagenet_boxes(str(folder)),
        "voc07": lambda: read_voc_boxes(str(folder), "2007"),
        "voc12": lambda: read_voc_boxes(str(folder), "2012"),
        "coco20k": lambda: read_coco20k_boxes(str(folder)),
    }
    return readers[dataset]()


def _backgrounds(
    model: Any, file: Path, folder: Path, normalisation: str, settings: TaskSettings
) -> dict[str, float]:
    from gspdml.data.imagenet9 import VARIATIONS, read_imagenet9
    from gspdml.evaluation.background_robustness import in9_accuracy
    from gspdml.models.released_classifier import released_classifier

    width = model.backbone.out_channels
    classifier = released_classifier(file)
    if classifier is None or classifier.in_features != width:
        raise DataError(
            f"{file}: no linear classifier head.weight [classes, {width}] and head.bias (a DINO "
            "checkpoint has none: its classes need a linear probe); give the supervised release"
        )
    result = {
        f"top1_{variation}": in9_accuracy(
            model,
            classifier,
            read_imagenet9(str(folder), variation),
            size=settings.size,
            normalisation=normalisation,
            device=settings.device,
            batch_size=settings.batch_size,
        )
        for variation in VARIATIONS.values()
    }
    result["bg_gap"] = result["top1_mixed_same"] - result["top1_mixed_rand"]
    return result


class TaskRunner(ReleasedRunner[TaskSettings, TaskEvaluation]):
    """The ``localisation`` and ``backgrounds`` protocols (module doc) for
    :func:`~.spec_run.reproduce_spec`."""

    settings_type = TaskSettings
    columns = ("Model", "Checkpoint", "Data", "Task")
    how = (
        "Nothing trains: each evaluation reads the released model's attention maps (maxboxacc, "
        "corloc) or its classifier's predictions (backgrounds) on the dataset's images."
    )

    def parse(self, overrides: Sequence[str], protocol: str) -> TaskSettings:
        return TaskSettings.parse(overrides, protocol)

    def draft(
        self, table: Table, row: Row, spec: FrozenSpec, settings: TaskSettings, data: Path
    ) -> TaskEvaluation:
        task, dataset_folder = DATASETS[row.dataset]
        return TaskEvaluation(
            row.dataset,
            spec,
            settings.checkpoint_of(spec),
            data / dataset_folder,
            _options(task, row, settings),
            Path(),
            settings.normalisation_of(row),
            _corloc_method(row) if task == "corloc" else "",
        )

    def compute(
        self, evaluation: TaskEvaluation, file: Path, settings: TaskSettings, memo: dict[Any, Any]
    ) -> dict[str, Any]:
        return _compute(evaluation, file, settings)

    def data_cells(self, evaluation: TaskEvaluation) -> list[Any]:
        return [str(evaluation.folder), evaluation.task]

    def shown(self, table: Table, row: Row) -> Optional[set[str]]:
        """The columns the paper prints for ``row``, and those it prints for no row (BG-gap)."""
        printed = {title for other in table.rows for title in other.paper}
        return set(row.paper) | ({c.title for c in table.columns} - printed)


TASKS = TaskRunner()

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
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Optional, cast

from gspdml.workflows.classification import ClassificationRecipe
from gspdml.workflows.reproduce.classify_spec import ClassifySpec
from gspdml.workflows.reproduce.registry import Row, Table
from gspdml.workflows.reproduce.report import content_of, number_problem, stored_result
from gspdml.workflows.reproduce.spec_run import SpecRunner, checkpoint_needs, result_file


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


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9.=-]+", "_", label).strip("_")


class ClassifyRunner(SpecRunner[ClassifySettings, ClassifyRun, Optional[Path]]):
    """The ``classify`` protocol (module doc) for :func:`~.spec_run.reproduce_spec`: a row
    trains its classifier, so a row that ran is "trained", as a training table's."""

    status = "trained"
    settings_type = ClassifySettings
    columns = ("Model", "Checkpoint", "Data")
    how = (
        "Each runnable row trains a classifier (backbone, pooling, linear layer; cross-entropy) "
        "on the training split and reports top-1 on the test split."
    )

    def evaluation(
        self, table: Table, row: Row, settings: ClassifySettings, data: Path, folder: Path
    ) -> Optional[ClassifyRun]:
        if row.classify is None:
            return None
        spec = settings.applied(row.classify)
        draft = ClassifyRun(spec, settings.checkpoint_of(spec), data / spec.folder, Path())
        return replace(draft, output=result_file(folder, _slug(row.label), draft.settings()))

    def checked(self, evaluation: ClassifyRun, where: str) -> Optional[Path]:
        """The released file a fine-tuning row starts from (None: a row trained from scratch),
        or a ConfigError naming the file to give."""
        released = evaluation.spec.released
        if released is None:
            return None
        return released.given_file(evaluation.checkpoint, where, "fine-tunes")

    def compute(
        self,
        evaluation: ClassifyRun,
        file: Optional[Path],
        settings: ClassifySettings,
        memo: dict[Any, Any],
    ) -> dict[str, Any]:
        return {"top1": _train(evaluation, file, settings)}

    def cells(self, evaluation: ClassifyRun) -> list[Any]:
        released = evaluation.spec.released
        if released is None:
            needs = "– (trained from scratch)"
        else:
            needs = checkpoint_needs(evaluation.checkpoint, released.url)
        return [evaluation.spec.describe(), needs, str(evaluation.folder)]

    def shown(self, table: Table, row: Row) -> Optional[set[str]]:
        return set(row.paper)


def _train(run: ClassifyRun, file: Optional[Path], settings: ClassifySettings) -> float:
    """The top-1 (a fraction) of the row's classifier, trained now (from ``file``, the
    released model, for a fine-tuning row)."""
    from gspdml.data.classification import classification_splits, classification_transforms
    from gspdml.models.backbones import build_backbone
    from gspdml.models.backbones.base import Backbone
    from gspdml.pooling import build_pooling
    from gspdml.workflows.classification import Classifier, train_classifier

    spec = run.spec
    train_transform, test_transform = classification_transforms(spec.resize, spec.crop)
    data = classification_splits(
        spec.reader, run.folder, train_transform, test_transform, fraction=spec.fraction
    )
    if spec.released is not None:
        assert file is not None  # ClassifyRunner.checked
        embedder = spec.released.embedder(file)
        backbone = cast(Backbone, embedder.backbone)
        pooling, norm = embedder.pooling, embedder.pooled_norm
    else:
        backbone = build_backbone({"name": spec.network}, 3)
        pooling = build_pooling(spec.pooling_spec(), in_channels=backbone.out_channels)
        norm = None
    width, classes = backbone.out_channels, data.num_classes
    model = Classifier(backbone, pooling, width, classes, norm, max_logits=spec.max_logits)
    return train_classifier(
        model,
        data.train,
        data.test,
        spec.recipe,
        run.run_dir,
        run.settings(),
        device=settings.device,
        workers=settings.workers,
    )


CLASSIFY = ClassifyRunner()

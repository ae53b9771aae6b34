"""``gspdml reproduce`` of ImageNet-1k classification by released pre-trained models (protocol
``probe``): every runnable row is a pinned released model
(:class:`~gspdml.workflows.reproduce.frozen_spec.FrozenSpec`) whose features of the ImageNet-1k
images are classified without changing the model (Psomas thesis §3.4.3, Tables 3.2 and 3.3).

Protocol. ImageNet-1k in its official layout (:mod:`gspdml.data.imagenet`), images resized to
256 on the shorter side and center-cropped to 224, ImageNet normalisation; the feature of an
image is the model's pooled vector before L2 normalisation (the DINO ViT's after its final
LayerNorm). A column's metric says how the validation images are classified:

* ``knn_top1``: DINO's weighted k-NN classifier on the L2-normalised features of the training
  images (:mod:`gspdml.evaluation.knn_classifier`; k = ``knn_k``, 10 as the thesis states,
  temperature ``knn_temperature`` 0.07 as DINO);
* ``linear_top1``: the linear probe trained on the training features
  (:mod:`gspdml.evaluation.linear_probe`; ``probe_epochs``, ``probe_lr``, ``probe_batch_size``);
* ``top1``: the classifier the supervised training learned with the model, stored in the
  released file (:mod:`gspdml.models.released_classifier`).

Each is the fraction of validation images whose prediction is their label.

Inputs. ``--data-root DIR`` (default ``data``) holds ImageNet-1k in ``DIR/imagenet``
(``train/``, ``val/``, ...). The settings ``key=value`` (:class:`ProbeRunSettings`): the model
files (``checkpoints=DIR`` or ``checkpoint=PATH``, as the ``frozen`` protocol,
:class:`~gspdml.workflows.reproduce.frozen_run.FrozenSettings`), ``device``, ``batch_size``,
``resize``, ``crop``, ``fraction`` (of each class's training images) and the classifiers'
settings above.

Results. Each row's evaluation is stored in ``<output_dir>/probe/<dataset>/<checkpoint
stem>-<pooling>-<key>.json``, ``key`` hashing :meth:`ProbeEvaluation.settings` (the
checkpoint by its content), and reused when checked valid
(:func:`~gspdml.workflows.reproduce.report.stored_result`).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from gspdml.errors import ConfigError, DataError
from gspdml.workflows.reproduce.frozen_run import FrozenSettings
from gspdml.workflows.reproduce.frozen_spec import FrozenSpec
from gspdml.workflows.reproduce.registry import Row, Table
from gspdml.workflows.reproduce.report import content_of, number_problem, stored_result
from gspdml.workflows.reproduce.settings import parse_settings
from gspdml.workflows.reproduce.spec_run import ReleasedRunner

if TYPE_CHECKING:
    import torch

    from gspdml.data.imagenet import ImageNet, ImageSet
    from gspdml.models.embedder import Embedder

#: a row's dataset -> its folder under ``--data-root``
FOLDERS = {"imagenet": "imagenet"}
#: the metrics of the protocol (module doc) -> what they classify with
METRICS = {
    "knn_top1": "weighted k-NN",
    "linear_top1": "linear probe",
    "top1": "the released classifier",
}
#: the settings read as real numbers (the others are strings or positive integers)
REALS = ("fraction", "knn_temperature", "probe_lr")


@dataclass(frozen=True)
class ProbeRunSettings(FrozenSettings):
    """The ``key=value`` settings of a ``probe`` table (module doc)."""

    fraction: float = 1.0
    knn_k: int = 10
    knn_temperature: float = 0.07
    probe_epochs: int = 100
    probe_lr: float = 0.001 * 1024 / 256
    probe_batch_size: int = 1024

    @classmethod
    def parse(cls, overrides: Sequence[str]) -> ProbeRunSettings:
        settings = parse_settings(cls, overrides, "probe")
        reals = {name: _positive_real(getattr(settings, name), name) for name in REALS}
        if reals["fraction"] > 1:
            raise ConfigError("fraction", f"must be in (0, 1], got {settings.fraction!r}")
        return replace(
            settings,
            fraction=reals["fraction"],
            knn_temperature=reals["knn_temperature"],
            probe_lr=reals["probe_lr"],
        )


def _positive_real(value: Any, name: str) -> float:
    """``value`` (a setting's default or the text given) as a positive number."""
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(name, f"expected a number, got {value!r}") from None
    if not number > 0:
        raise ConfigError(name, f"must be positive, got {value!r}")
    return number


@dataclass(frozen=True)
class ProbeEvaluation:
    """A row as it runs: the row's model, its ``checkpoint`` file (None: not given), the data
    ``folder``, the ``metrics`` of the columns the paper printed for the row, the settings that
    decide them, and the result file ``output``."""

    dataset: str
    spec: FrozenSpec
    checkpoint: Optional[Path]
    folder: Path
    metrics: tuple[str, ...]
    options: ProbeRunSettings
    output: Path

    def settings(self) -> dict[str, Any]:
        """Everything that decides the numbers, as stored beside them."""
        given = self.options
        decided: dict[str, Any] = {
            "dataset": self.dataset,
            "model": self.spec.describe(),
            "gamma": self.spec.gamma,
            "checkpoint": content_of(self.checkpoint),
            "data": str(self.folder),
            "resize": given.resize,
            "crop": given.crop,
            "metrics": list(self.metrics),
        }
        if self.uses_training_images:
            decided["fraction"] = given.fraction
        if "knn_top1" in self.metrics:
            decided.update(knn_k=given.knn_k, knn_temperature=given.knn_temperature)
        if "linear_top1" in self.metrics:
            decided.update(
                probe_epochs=given.probe_epochs,
                probe_lr=given.probe_lr,
                probe_batch_size=given.probe_batch_size,
            )
        return decided

    @property
    def uses_training_images(self) -> bool:
        return "knn_top1" in self.metrics or "linear_top1" in self.metrics

    def stored(self) -> Optional[dict[str, Any]]:
        return stored_result(self.output, self.settings(), self.result_problem)

    def result_problem(self, result: dict[str, Any]) -> Optional[str]:
        """What is wrong with a stored ``result`` (None: nothing): it holds exactly the
        :attr:`metrics`, each a fraction in [0, 1]."""
        if set(result) != set(self.metrics):
            return f"fields {sorted(result)}, expected {sorted(self.metrics)}"
        problems = (number_problem(result, key, 1.0) for key in sorted(self.metrics))
        return next(filter(None, problems), None)


def _metrics(table: Table, row: Row) -> tuple[str, ...]:
    """The metrics of the columns the paper printed for ``row``."""
    metrics = {c.title: c.metric for c in table.columns}
    unknown = sorted({metrics[title] for title in row.paper} - set(METRICS))
    if unknown:
        raise ValueError(f"table {table.key}: metrics {unknown} are not of {sorted(METRICS)}")
    return tuple(sorted({metrics[title] for title in row.paper}))


def pooled_features(
    model: Embedder, images: ImageSet, settings: ProbeRunSettings, split: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(features [N, D], labels [N])`` of ``images``: the model's pooled vector before L2
    normalisation (float32, on the CPU), in the order of the images; ``split`` (its name)
    without images is refused as the accuracies refuse it
    (:func:`~gspdml.evaluation.top1.no_image_to_score`) before anything is embedded."""
    import torch
    from torch.utils.data import DataLoader

    from gspdml.data.recipes import image_transform
    from gspdml.evaluation.top1 import no_image_to_score
    from gspdml.models.inference import resolve_device, stack_batch

    if len(images) == 0:
        raise no_image_to_score(split)

    device = resolve_device(settings.device)
    transform = image_transform("center", resize=settings.resize, crop=settings.crop)
    loader = DataLoader(
        images.dataset(transform), batch_size=settings.batch_size, collate_fn=stack_batch
    )
    model = model.to(device).eval()
    chunks = []
    with torch.no_grad():
        for batch in loader:
            if batch is not None:
                pooled = model(batch[0].to(device)).pooled
                assert pooled is not None  # an Embedder returns its pooled vector
                chunks.append(pooled.float().cpu())
    return torch.cat(chunks), torch.as_tensor(images.labels)


def _probe(
    evaluation: ProbeEvaluation, model: Embedder, imagenet: ImageNet, file: Path
) -> dict[str, float]:
    """The metrics of ``evaluation`` (fractions), computed now."""
    from gspdml.evaluation.knn_classifier import weighted_knn_top1
    from gspdml.evaluation.linear_probe import ProbeSettings, linear_probe_top1, top1
    from gspdml.models.inference import resolve_device
    from gspdml.models.released_classifier import released_classifier

    settings = evaluation.options
    device = resolve_device(settings.device)
    val, val_labels = pooled_features(model, imagenet.val, settings, "ImageNet's val split")
    if evaluation.uses_training_images:
        train, train_labels = pooled_features(
            model, imagenet.train, settings, "ImageNet's train split"
        )
    result = {}
    for metric in evaluation.metrics:
        if metric == "knn_top1":
            k, temperature = settings.knn_k, settings.knn_temperature
            result[metric] = weighted_knn_top1(
                train, train_labels, val, val_labels, k, temperature, device
            )
        elif metric == "linear_top1":
            probe = ProbeSettings(
                settings.probe_epochs, settings.probe_batch_size, settings.probe_lr
            )
            result[metric] = linear_probe_top1(
                train.to(device), train_labels, val, val_labels, probe
            )
        else:
            head = released_classifier(file)
            if head is None:
                raise DataError(
                    f"{file}: holds no classifier (head.weight/head.bias or fc.weight/fc.bias), "
                    f"so its top-1 cannot be evaluated; give the supervised release of "
                    f"{evaluation.spec.checkpoint}"
                )
            result[metric] = top1(head, val, val_labels)
    return result


def _read(folder: Path, fraction: float) -> ImageNet:
    """ImageNet under ``folder``; what the reader left out is said on stderr."""
    from gspdml.data.imagenet import read_imagenet

    imagenet = read_imagenet(folder, fraction)
    if imagenet.skipped:
        shown = ", ".join(imagenet.skipped[:3])
        print(
            f"gspdml reproduce: {folder}: left out {len(imagenet.skipped)} hidden entries "
            f"({shown})",
            file=sys.stderr,
        )
    return imagenet


class ProbeRunner(ReleasedRunner[ProbeRunSettings, ProbeEvaluation]):
    """The ``probe`` protocol (module doc) for :func:`~.spec_run.reproduce_spec`."""

    settings_type = ProbeRunSettings
    columns = ("Model", "Checkpoint", "Data", "Classifier")
    how = (
        "Nothing trains but the linear probe: each evaluation embeds the ImageNet-1k validation "
        "images (and, for the k-NN classifier and the probe, the training images) once with the "
        "released model."
    )

    def parse(self, overrides: Sequence[str], protocol: str) -> ProbeRunSettings:
        return ProbeRunSettings.parse(overrides)

    def draft(
        self, table: Table, row: Row, spec: FrozenSpec, settings: ProbeRunSettings, data: Path
    ) -> ProbeEvaluation:
        return ProbeEvaluation(
            row.dataset,
            spec,
            settings.checkpoint_of(spec),
            data / FOLDERS[row.dataset],
            _metrics(table, row),
            settings,
            Path(),
        )

    def compute(
        self,
        evaluation: ProbeEvaluation,
        file: Path,
        settings: ProbeRunSettings,
        memo: dict[Any, Any],
    ) -> dict[str, Any]:
        """The metrics of ``evaluation``; ``memo``: the ImageNet folders read so far."""
        if evaluation.folder not in memo:
            memo[evaluation.folder] = _read(evaluation.folder, settings.fraction)
        return _probe(evaluation, evaluation.spec.embedder(file), memo[evaluation.folder], file)

    def data_cells(self, evaluation: ProbeEvaluation) -> list[Any]:
        metrics = ", ".join(METRICS[m] for m in evaluation.metrics)
        return [str(evaluation.folder), metrics]

    def shown(self, table: Table, row: Row) -> Optional[set[str]]:
        return set(row.paper)


PROBE = ProbeRunner()

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

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from gspdml.workflows.reproduce.frozen_spec import FrozenSpec
from gspdml.workflows.reproduce.registry import Row, Table
from gspdml.workflows.reproduce.report import content_of, number_problem, stored_result
from gspdml.workflows.reproduce.spec_run import ReleasedRunner

if TYPE_CHECKING:
    from gspdml.models.embedder import Embedder

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


def _recall_at(table: Table, row: Row) -> tuple[int, ...]:
    """The K of the columns the paper printed for ``row``."""
    metrics = {c.title: c.metric for c in table.columns}
    return tuple(sorted(int(metrics[title].removeprefix("recall_at_")) for title in row.paper))


class FrozenRunner(ReleasedRunner[FrozenSettings, FrozenEvaluation]):
    """The ``frozen`` protocol (module doc) for :func:`~.spec_run.reproduce_spec`."""

    settings_type = FrozenSettings
    columns = ("Model", "Checkpoint", "Data", "Metrics")
    how = (
        "Nothing trains: each evaluation embeds the dataset's test images once with the "
        "released model and ranks them by nearest-neighbour search."
    )

    def draft(
        self, table: Table, row: Row, spec: FrozenSpec, settings: FrozenSettings, data: Path
    ) -> FrozenEvaluation:
        return FrozenEvaluation(
            row.dataset,
            spec,
            settings.checkpoint_of(spec),
            data / DATASETS[row.dataset][1],
            settings.resize,
            settings.crop,
            _recall_at(table, row),
            Path(),
        )

    def compute(
        self,
        evaluation: FrozenEvaluation,
        file: Path,
        settings: FrozenSettings,
        memo: dict[Any, Any],
    ) -> dict[str, Any]:
        """The R@K of ``evaluation`` (fractions); ``memo``: the models loaded so far, by file
        and spec."""
        from gspdml.evaluation.service import EvalSpec, evaluate

        spec = evaluation.spec
        if (file, spec) not in memo:
            memo[file, spec] = spec.embedder(file)
        model: Embedder = memo[file, spec]
        report = evaluate(
            model,
            evaluation.split(),
            EvalSpec(metrics=("recall_at",), recall_at=evaluation.recall_at),
            device=settings.device,
            precision="fp32",
            batch_size=settings.batch_size,
        )
        return {
            f"recall_at_{k}": float(report.metrics[f"recall_at_{k}"]) for k in evaluation.recall_at
        }

    def data_cells(self, evaluation: FrozenEvaluation) -> list[Any]:
        recalls = ", ".join(f"R@{k}" for k in evaluation.recall_at)
        return [str(evaluation.folder), recalls]


FROZEN = FrozenRunner()

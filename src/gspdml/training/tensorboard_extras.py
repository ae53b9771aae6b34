"""TensorBoard beyond scalars, when ``trainer.tensorboard`` is on (single process):

- at every validation round, histograms of the pooling's parameters (``pooling/<name>``, e.g.
  GSP's prototypes) and of the pooling weights it gives on the first :data:`WEIGHT_IMAGES`
  images of the evaluation split (``pooling/output_weights``: GSP's transport weights,
  SimPool's attention; poolings without spatial weights have none);
- at the end, the embedding projector of the test split (query side; a seeded sample of at most
  :data:`PROJECTOR_POINTS` images), labelled by class, under the tag ``test``.

It is a sink of the run's :class:`~gspdml.training.metrics_log.MetricsLog`: it acts on the
records the trainer writes (a validation round, the final test record).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch.utils.data import Subset

WEIGHT_IMAGES = 32
PROJECTOR_POINTS = 2000


class TensorBoardExtras:
    """Histograms and the projector of a running trainer (module doc)."""

    def __init__(self, trainer: Any):
        self.trainer = trainer

    @property
    def writer(self) -> Any:
        return self.trainer.log._writer

    def log(self, record: Mapping[str, Any]) -> None:
        if self.writer is None or self.trainer.dist is not None:
            return
        step = int(record.get("step", 0))
        if record.get("final"):
            self._projector(step)
        elif record.get("split") == self.trainer.config.evaluation.split:
            self._histograms(step)

    def _histograms(self, step: int) -> None:
        model = self.trainer.model
        pooling = getattr(model, "pooling", None)
        if pooling is not None:
            for name, param in pooling.named_parameters():
                self.writer.add_histogram(f"pooling/{name}", param.detach().float().cpu(), step)
        split = self.trainer.eval_split.query
        count = min(WEIGHT_IMAGES, len(split))
        images = torch.stack([split[i][0] for i in range(count)]).to(self.trainer.device)
        was_training = model.training
        model.eval()
        with torch.no_grad():
            weights = getattr(model(images), "weights", None)
        model.train(was_training)
        if weights is not None:
            self.writer.add_histogram(
                "pooling/output_weights", weights.detach().float().cpu(), step
            )
        self.writer.flush()

    def _projector(self, step: int) -> None:
        test = self.trainer.data.test
        if test is None:
            return
        dataset = test.query
        rows = np.arange(len(dataset))
        if len(rows) > PROJECTOR_POINTS:
            rows = np.sort(
                np.random.default_rng(self.trainer.config.seed).choice(
                    len(rows), PROJECTOR_POINTS, replace=False
                )
            )
            dataset = Subset(dataset, rows.tolist())
        embeddings, labels = self.trainer.embed(dataset)
        self.writer.add_embedding(
            embeddings.float().cpu(),
            metadata=[str(int(label)) for label in labels],
            global_step=step,
            tag="test",
        )
        self.writer.flush()

    def close(self) -> None:
        pass

"""TensorBoard beyond scalars (single process), a sink of the run's
:class:`~gspdml.training.metrics_log.MetricsLog`: at every validation round, histograms of the
pooling's parameters and of its output weights on the first :data:`WEIGHT_IMAGES` evaluation
images; at the end, the embedding projector of a seeded sample of the test queries (their
embeddings from the test round, not a second pass over the images).
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
            output_weights = weights.detach().float().cpu()
            self.writer.add_histogram("pooling/output_weights", output_weights, step)
        self.writer.flush()

    def _projector(self, step: int) -> None:
        test = self.trainer.data.test
        if test is None:
            return
        dataset = test.query
        rows = np.arange(len(dataset))
        if len(rows) > PROJECTOR_POINTS:
            rng = np.random.default_rng(self.trainer.config.seed)
            rows = np.sort(rng.choice(len(rows), PROJECTOR_POINTS, replace=False))
        scored = self.trainer.evaluator.last_scored
        if scored is not None and scored[0] is test:  # the test round just embedded them
            index = torch.from_numpy(rows)
            embeddings, labels = scored[1][index], scored[2][index]
        else:
            embeddings, labels = self.trainer.embed(Subset(dataset, rows.tolist()))
        self.writer.add_embedding(
            embeddings.float().cpu(),
            metadata=[str(int(label)) for label in labels],
            global_step=step,
            tag="test",
        )
        self.writer.flush()

    def close(self) -> None:
        pass

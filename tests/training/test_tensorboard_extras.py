"""TensorBoard beyond scalars: histograms of the pooling's parameters and output weights at
each validation round, and the test split's embedding projector, read back with TensorBoard's
own event reader. The projector shows the test round's own embeddings: the test queries are
embedded once at the end of a run, not a second time for it."""

from __future__ import annotations

import numpy as np
import pytest

from gspdml.config import load_config
from gspdml.training import Trainer
from gspdml.training import evaluator as evaluator_module
from gspdml.training.metrics_log import MetricsLog


def test_pooling_histograms_and_the_test_projector(make_config, tmp_path, monkeypatch):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    gsp = {"name": "gsp", "num_prototypes": 4, "init": "random", "iters": 10}
    config = load_config(
        make_config(
            model={"pooling": gsp},
            schedule={"max_steps": 4},
            evaluation={"every": 2},
            trainer={"tensorboard": True},
        )
    )
    run = tmp_path / "runs" / "tiny"
    embedded = []  # every dataset the run embeds
    real = evaluator_module.embed

    def counted(model, dataset, **options):
        embedded.append(dataset)
        return real(model, dataset, **options)

    monkeypatch.setattr(evaluator_module, "embed", counted)
    trainer = Trainer.from_config(config, run)
    trainer.fit()
    test_images = trainer.data.test.query
    # the test queries are embedded by the step-0 baseline and the test round, not a third time
    # for the projector
    passes = [d is test_images or getattr(d, "dataset", None) is test_images for d in embedded]
    assert passes.count(True) == 2 and passes[0] and passes[-1]
    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"histograms": 0})
    events.Reload()
    tags = events.Tags()["histograms"]
    assert "pooling/output_weights" in tags and any(
        t.startswith("pooling/") and t != "pooling/output_weights" for t in tags
    )
    assert [h.step for h in events.Histograms("pooling/output_weights")] == [2, 4]
    # the projector: one row per test image, labelled
    test = next(r for r in MetricsLog(run / "metrics.jsonl").read() if r.get("final"))
    test_step = test["step"]
    folder = run / "tensorboard" / f"{test_step:05d}" / "test"
    vectors = (folder / "tensors.tsv").read_text().splitlines()
    labels = (folder / "metadata.tsv").read_text().splitlines()
    assert len(vectors) == len(labels) == test["num_queries"]
    assert len(vectors[0].split("\t")) == config.model.embedding_dim
    # the rows are the test queries in their order, with the saved (tested) weights
    shown = np.array([[float(x) for x in row.split("\t")] for row in vectors])
    again, again_labels = trainer.embed(test_images)
    np.testing.assert_allclose(shown, again.float().cpu().numpy(), rtol=1e-5, atol=1e-6)
    assert labels == [str(int(label)) for label in again_labels]
    assert (run / "tensorboard" / "projector_config.pbtxt").is_file()

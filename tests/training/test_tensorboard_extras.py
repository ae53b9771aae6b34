"""TensorBoard beyond scalars: histograms of the pooling's parameters and output weights at
each validation round, and the test split's embedding projector, read back with TensorBoard's
own event reader."""

from __future__ import annotations

import pytest

from gspdml.config import load_config
from gspdml.training import train
from gspdml.training.metrics_log import MetricsLog


def test_pooling_histograms_and_the_test_projector(make_config, tmp_path):
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
    train(config)
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
    assert (run / "tensorboard" / "projector_config.pbtxt").is_file()

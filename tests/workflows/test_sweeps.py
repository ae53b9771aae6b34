"""gspdml.workflows.sweeps: the sample std, and run_sweep on a tiny collage (moved here from the
smoke tests of the GSP sweeps, which now train through experiments/common.py)."""

import math

import numpy as np
import pytest

from gspdml.workflows.sweeps import mean_std, run_sweep

TINY = ["data.dataset.images_per_class=8", "data.dataset.class_split=[12, 6, 6]", "data.classes_per_batch=4",
        "model.backbone.widths=[8, 16, 16]", "model.embedding_dim=16", "model.pooling.num_prototypes=4",
        "model.pooling.memory_size=16", "schedule.max_steps=3", "evaluation.every=3", "evaluation.patience=null",
        "trainer.progress=false"]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_mean_std_is_the_sample_std():
    values = [0.2, 0.5, 0.9]
    assert mean_std(values) == pytest.approx({"mean": np.mean(values), "std": np.std(values, ddof=1)})
    assert mean_std([0.4]) == {"mean": 0.4, "std": 0.0}


def test_a_sweep_trains_every_variant_and_a_second_sweep_replaces_the_first(tmp_path):
    variants = {"mu=0.25": ["model.pooling.mu=0.25"], "mu=1": ["model.pooling.mu=1.0"]}
    sweep = run_sweep("scratch-gsp", variants, [0], tmp_path, TINY, log=lambda line: None)
    assert list(sweep) == list(variants)
    for label, row in sweep.items():
        (run,) = row["per_seed"]
        assert run["steps"] == 3 and 0.0 <= run["map_at_r"] <= 1.0 and math.isfinite(run["precision_at_1"])
        assert row["map_at_r"] == {"mean": run["map_at_r"], "std": 0.0} and row["overrides"] == variants[label]
    assert "mu: 0.25" in (tmp_path / "mu=0.25-seed0" / "config.yaml").read_text()
    first = (tmp_path / "mu=1-seed0" / "results.json").stat().st_mtime_ns
    run_sweep("scratch-gsp", {"mu=1": variants["mu=1"]}, [0], tmp_path, TINY, log=lambda line: None)
    assert (tmp_path / "mu=1-seed0" / "results.json").stat().st_mtime_ns > first

"""experiments/gsp_mu_sweep and experiments/gsp_m_eps_grid (seed 000 Fig. 6 and Fig. 8), smoke
runs on a tiny collage; gspdml.workflows.sweeps."""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from gspdml.workflows.sweeps import mean_std

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from experiments.gsp_m_eps_grid import run as grid  # noqa: E402
from experiments.gsp_mu_sweep import run as mu_sweep  # noqa: E402


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("GSPDML_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_mean_std_is_the_sample_std():
    values = [0.2, 0.5, 0.9]
    assert mean_std(values) == pytest.approx({"mean": np.mean(values), "std": np.std(values, ddof=1)})
    assert mean_std([0.4]) == {"mean": 0.4, "std": 0.0}


def _check_sweep(sweep, labels, out):
    assert list(sweep) == labels
    for label, row in sweep.items():
        (run,) = row["per_seed"]
        assert run["steps"] == 3
        assert 0.0 <= run["map_at_r"] <= 1.0 and math.isfinite(run["precision_at_1"])
        assert row["map_at_r"] == {"mean": run["map_at_r"], "std": 0.0}
        assert (out / "runs" / f"{label.replace(' ', '_')}-seed0" / "results.json").is_file()


def test_mu_sweep_smoke(tmp_path):
    mu_sweep.main(["--smoke", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    _check_sweep(results["sweep"], ["mu=0.25", "mu=1"], tmp_path)
    config = (tmp_path / "runs" / "mu=0.25-seed0" / "config.yaml").read_text()
    assert "mu: 0.25" in config and "max_steps: 3" in config


def test_a_second_run_replaces_the_first(tmp_path):
    """Running a sweep again into the same directory retrains (a finished run directory would
    otherwise refuse to start: 'already holds a run')."""
    mu_sweep.main(["--smoke", "--out", str(tmp_path)])
    first = (tmp_path / "runs" / "mu=1-seed0" / "results.json").stat().st_mtime_ns
    mu_sweep.main(["--smoke", "--out", str(tmp_path)])
    assert (tmp_path / "runs" / "mu=1-seed0" / "results.json").stat().st_mtime_ns > first
    _check_sweep(json.loads((tmp_path / "results.json").read_text())["sweep"], ["mu=0.25", "mu=1"], tmp_path)


def test_m_eps_grid_smoke(tmp_path):
    grid.main(["--smoke", "--out", str(tmp_path)])
    results = json.loads((tmp_path / "results.json").read_text())
    _check_sweep(results["sweep"], ["m=2 eps=5", "m=4 eps=5"], tmp_path)
    assert results["best"] in results["sweep"]

"""Smoke run of experiments/zero_shot_attributes: four trainings, class histograms and the
1000-split protocol (shortened)."""

import importlib.util
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def test_zero_shot_attributes_smoke(tmp_path):
    spec = importlib.util.spec_from_file_location("exp_zero_shot", ROOT / "experiments" / "zero_shot_attributes" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    results = module.main(["--smoke", "--out", str(tmp_path)])
    assert (tmp_path / "results.json").is_file() and (tmp_path / "class_histograms.png").stat().st_size > 5_000
    assert set(results["summary"]) == {"gsp", "gsp_zsr", "gap_xml0", "gap_xml"}
    for method, hist in results["class_histograms_seed0"].items():
        hist = np.array(hist)
        assert hist.shape == (10, 8)
        np.testing.assert_allclose(hist.sum(1), 1.0, atol=1e-4)  # mean of per-image histograms
        row = results["per_seed"][method][0]
        assert 0.0 <= row["l2"] <= 1.0 and 0.0 <= row["cosine"] <= 1.0 and 0.0 <= row["map_c"] <= 1.0

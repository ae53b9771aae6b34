"""Smoke run of experiments/gap_analysis: the PCC-GAP bound holds on every image."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"exp_{name}", ROOT / "experiments" / name / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gap_analysis_smoke(tmp_path):
    results = _load("gap_analysis").main(["--smoke", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "results.json").read_text())["smoke"] is True
    for source in ("synthetic", "trained"):
        assert (tmp_path / f"{source}.png").stat().st_size > 10_000
        for row in results["sources"][source]["per_seed"]:
            assert 0 < row["covering_radius"] < 2
            assert 0 < row["max_ratio"] <= 1.0  # Prop. 4.2.1: ||PCC - GAP|| <= delta
            assert row["max_distance"] <= row["covering_radius"]
            assert 1 <= row["active_per_class"] <= row["active_per_class_any_mass"] <= 48
            assert 0.0 <= row["hull_overlap_fraction"] <= 1.0

"""Smoke run of experiments/gap_analysis: the PCC-GAP bound holds on every image; the table and
the verdict rows follow the per-seed values."""

import copy
import json

from tests.helpers.experiments import load_experiment

gap_analysis = load_experiment("gap_analysis")


def test_gap_analysis_smoke(tmp_path):
    results = gap_analysis.main(["--smoke", "--out", str(tmp_path)])
    assert json.loads((tmp_path / "results.json").read_text())["smoke"] is True
    for source in ("synthetic", "trained"):
        assert (tmp_path / f"{source}.png").stat().st_size > 10_000
        for row in results["sources"][source]["per_seed"]:
            assert 0 < row["covering_radius"] < 2
            assert 0 < row["max_ratio"] <= 1.0  # Prop. 4.2.1: ||PCC - GAP|| <= delta
            assert row["max_distance"] <= row["covering_radius"]
            assert 1 <= row["active_per_class"] <= row["active_per_class_any_mass"] <= 48
            assert 0.0 <= row["hull_overlap_fraction"] <= 1.0
    assert [line.split(" | ")[0].lstrip("| ") for line in results["table"].splitlines()[2:]] == [
        "synthetic",
        "trained",
    ]
    delta = results["sources"]["synthetic"]["per_seed"][0]["covering_radius"]
    assert f"| synthetic | {delta:.3f} ± 0.000 |" in results["table"]  # one seed: std 0

    rows = gap_analysis.reproduction({"2-D": results})
    assert [row["verdict"] for row in rows] == ["reproduced", "reproduced"]
    broken = copy.deepcopy(results)
    broken["sources"]["trained"]["per_seed"][0]["hull_overlap_fraction"] = 0.0
    broken["sources"]["synthetic"]["per_seed"][0]["max_ratio"] = 1.2
    rows = gap_analysis.reproduction({"2-D": broken})
    assert [row["verdict"] for row in rows] == [
        "partly (holds for trained only)",
        "partly (holds for synthetic only)",
    ]


def test_aggregate_uses_the_sample_std():
    stats = gap_analysis.aggregate([{"x": 1.0}, {"x": 2.0}, {"x": 4.0}])
    assert stats["x"]["mean"] == 7.0 / 3 and abs(stats["x"]["std"] - (7.0 / 3) ** 0.5) < 1e-12

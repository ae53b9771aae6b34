"""Shared helpers of the experiment scripts: statistics, config overrides, failed runs."""

import json
import statistics

import pytest
from exp_loader import load_common

common = load_common()


def test_mean_std_is_the_sample_statistics():
    values = [61.25, 58.5, 63.0]
    assert common.mean_std(values) == pytest.approx((statistics.fmean(values), statistics.stdev(values)))
    assert common.mean_std([7.0]) == (7.0, 0.0)


def test_summary_and_cell_report_finished_and_diverged_runs():
    results = [
        {"seed": 0, "seconds": 2.0, "steps": 5, "test": {"map_at_r": 0.25}},
        {"seed": 1, "seconds": 3.0, "steps": 5, "test": {"map_at_r": 0.35}},
        {"seed": 2, "seconds": 1.0, "failed": "non-finite loss (nan) at step 3"},
    ]
    entry = common.summary(results, ["map_at_r"])
    assert entry["map_at_r"]["values"] == pytest.approx([25.0, 35.0])
    assert entry["seconds"] == 6.0 and list(entry["failed"]) == [2]
    assert common.cell(entry, "map_at_r") == f"30.00 ± {statistics.stdev([25.0, 35.0]):.2f} (1/3 diverged)"
    assert common.cell(common.summary(results[2:], ["map_at_r"]), "map_at_r") == "diverged"
    json.dumps(entry)  # the summary goes to results.json as is


def test_config_trains_the_given_steps_and_evaluates_once():
    cfg = common.config("demo-gap.yaml", ["model.pooling={name: gmp}"], steps=37, name="probe")
    assert cfg["name"] == "probe" and cfg["schedule"]["max_steps"] == 37 and cfg["evaluation"]["every"] == 37
    assert cfg["evaluation"]["patience"] is None and cfg["schedule"]["plateau"] is None
    assert cfg["model"]["pooling"]["name"] == "gmp"
    assert list(cfg["data"]["dataset"]["class_split"]) == [60, 2, 20]
    smoke = common.config("demo-gap.yaml", steps=2, name="probe", smoke=True)
    assert list(smoke["data"]["dataset"]["class_split"]) == [16, 2, 4] and smoke["data"]["dataset"]["images_per_class"] == 8


def test_markdown_table_layout():
    assert common.markdown_table(["a", "b"], [[1, "x"]]).splitlines() == ["| a | b |", "|---|---|", "| 1 | x |"]

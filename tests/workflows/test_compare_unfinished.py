"""``gspdml compare`` over a folder of runs (a seed sweep) refuses a run that has not finished
(``config.yaml`` without ``results.json``: crashed, or still training) and names it; it used to
leave it out, so the method's mean and paired tests were over the runs that happened to finish
(a diverged seed dropped from the mean) with nothing said but the count in brackets."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from gspdml.errors import DataError
from gspdml.workflows.compare import compare_folders, method_models


def _sweep(root, values):
    for seed, value in enumerate(values):
        run = root / f"seed{seed}"
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(yaml.safe_dump({"seed": seed, "data": {"dataset": {}}}))
        if value is not None:
            (run / "results.json").write_text(json.dumps({"test": {"map_at_r": value}}))
    return root


def test_an_unfinished_run_of_a_sweep_is_named_not_left_out(tmp_path):
    baseline = _sweep(tmp_path / "a", (0.30, 0.31, 0.29))
    method = _sweep(tmp_path / "b", (0.35, 0.36, None))
    unfinished = method / "seed2"
    with pytest.raises(DataError, match=re.escape(f"{unfinished}: a run without results.json")):
        method_models(method)
    with pytest.raises(DataError, match="--resume"):
        compare_folders([baseline, method], metrics=["map_at_r"])
    (unfinished / "results.json").write_text(json.dumps({"test": {"map_at_r": 0.2}}))
    row = compare_folders([baseline, method], metrics=["map_at_r"])["rows"][1]
    assert row["models"] == 3 and row["summary"]["mean"] == pytest.approx((0.35 + 0.36 + 0.2) / 3)


def test_other_entries_of_the_folder_are_not_runs(tmp_path):
    sweep = _sweep(tmp_path / "a", (0.30, 0.31))
    (sweep / "mlruns").mkdir()  # a tracker's store beside the runs
    (sweep / "notes.txt").write_text("seed sweep")
    assert sorted(method_models(sweep)) == [(None, 0), (None, 1)]

"""Shared helpers of the experiment scripts: statistics, config overrides, failed runs."""

import json
import statistics

import pytest
from gspdml.config import dump_config
from tests.helpers.experiments import load_common

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
    cfg = common.config("scratch-gap.yaml", ["model.pooling={name: gmp}"], steps=37, name="probe")
    assert cfg["name"] == "probe" and cfg["schedule"]["max_steps"] == 37 and cfg["evaluation"]["every"] == 37
    assert cfg["evaluation"]["patience"] is None and cfg["schedule"]["plateau"] is None
    assert cfg["model"]["pooling"]["name"] == "gmp"
    assert list(cfg["data"]["dataset"]["class_split"]) == [60, 2, 20]
    smoke = common.config("scratch-gap.yaml", steps=2, name="probe", smoke=True)
    assert list(smoke["data"]["dataset"]["class_split"]) == [16, 2, 4] and smoke["data"]["dataset"]["images_per_class"] == 8


def test_train_seeds_reuses_only_finished_runs_with_the_same_config(monkeypatch, tmp_path):
    """The runner's reuse rule (gspdml.workflows.runner) with --reuse; from scratch without it."""
    import yaml

    import gspdml.training
    from gspdml.errors import ConfigError, TrainingError

    calls = []

    def fake_train(cfg, run_dir, **kwargs):
        calls.append((cfg["seed"], cfg["schedule"]["max_steps"]))
        run_dir.mkdir(parents=True)
        (run_dir / "config.yaml").write_text(dump_config(cfg))
        if cfg["schedule"]["max_steps"] == 9:
            raise TrainingError("non-finite loss (nan) at step 4; training stopped")
        results = {"steps": cfg["schedule"]["max_steps"], "test": {"map_at_r": 0.1 * (1 + cfg["seed"])}}
        (run_dir / "results.json").write_text(json.dumps(results))
        return results

    monkeypatch.setattr(gspdml.training, "train", fake_train)
    cfg = common.config("scratch-gap.yaml", steps=3, name="probe")
    first = common.train_seeds(cfg, [0, 1], tmp_path)
    assert calls == [(0, 3), (1, 3)] and [r["test"]["map_at_r"] for r in first] == [0.1, 0.2]
    assert common.train_seeds(cfg, [0, 1], tmp_path, reuse=True) == json.loads(json.dumps(first))
    assert len(calls) == 2  # nothing retrained
    common.train_seeds(cfg, [1], tmp_path)
    assert calls[-1] == (1, 3)  # without reuse: retrained
    longer = common.config("scratch-gap.yaml", steps=5, name="probe")
    with pytest.raises(ConfigError, match="holds a run of another config .*schedule.max_steps.*run without --reuse"):
        common.train_seeds(longer, [0], tmp_path, reuse=True)  # the config changed: refused, never overwritten
    assert calls[-1] == (1, 3)
    common.train_seeds(longer, [0], tmp_path)
    assert calls[-1] == (0, 5)  # without reuse: retrained with the new config
    failed = common.train_seeds(common.config("scratch-gap.yaml", steps=9, name="probe"), [0], tmp_path)
    assert failed[0]["failed"] == "non-finite loss (nan) at step 4" and "test" not in failed[0]


def _slow_rows(runs):
    import time

    time.sleep(0.05)  # widens the read-merge-write window
    return [{"keys": sorted(runs)}]


def _publish_key(key):
    common.publish("toy", key, {"seconds": 1.0}, _slow_rows)


def test_processes_publishing_other_keys_at_once_keep_all_of_them(tmp_path, monkeypatch):
    import multiprocessing

    monkeypatch.setattr(common, "ROOT", tmp_path)  # inherited by the forked processes
    (tmp_path / "experiments" / "toy").mkdir(parents=True)
    keys = [f"key{k}" for k in range(6)]
    with multiprocessing.get_context("fork").Pool(len(keys)) as pool:
        pool.map(_publish_key, keys)
    stored = json.loads((tmp_path / "experiments" / "toy" / "results.json").read_text())
    assert sorted(stored["runs"]) == keys and stored["reproduction"] == [{"keys": keys}]

"""Experiment trackers, offline, read back by their own clients: MLflow's ``MlflowClient`` on
the local SQLite store, W&B's offline run file by its own reader (``wandb leet inspect``)."""

from __future__ import annotations

import json

import pytest

from gspdml.config import load_config
from gspdml.training import train
from gspdml.training.metrics_log import MetricsLog


def test_mlflow_gets_the_config_and_every_metric_and_a_resume_continues_its_run(
    make_config, tmp_path
):
    from mlflow.tracking import MlflowClient

    config = load_config(
        make_config(
            schedule={"max_steps": 4},
            evaluation={"every": 2},
            trainer={"trackers": ["mlflow"], "log_every": 1},
        )
    )
    run = tmp_path / "runs" / "tiny"
    train(config)
    client = MlflowClient(tracking_uri=f"sqlite:///{(tmp_path / 'runs' / 'mlflow.db').resolve()}")
    run_id = json.loads((run / "trackers.json").read_text())["mlflow"]
    stored = client.get_run(run_id)
    assert stored.info.run_name == "tiny" and stored.info.status == "FINISHED"
    assert json.loads(stored.data.params["loss.neg_margin"]) == 0.5
    assert json.loads(stored.data.params["trainer.trackers"]) == ["mlflow"]  # a list: one param
    records = MetricsLog(run / "metrics.jsonl").read()
    val = [(r["step"], r["map_at_r"]) for r in records if r.get("split") == "val"]
    history = client.get_metric_history(run_id, "val/map_at_r")
    assert [m.step for m in history] == [step for step, _ in val]
    assert [m.value for m in history] == pytest.approx([value for _, value in val])
    final = next(r for r in records if r.get("final"))
    assert stored.data.metrics["test_final/map_at_r"] == pytest.approx(final["map_at_r"])
    # a resumed run logs into the same MLflow run
    (run / "results.json").unlink()
    train(config, resume=True)
    assert json.loads((run / "trackers.json").read_text())["mlflow"] == run_id
    assert len(client.search_runs([stored.info.experiment_id])) == 1


def test_mlflow_file_store_is_read_back_by_mlflows_client(make_config, tmp_path, monkeypatch):
    """``mlflow_file``: MLflow's file store (``output_dir/mlruns``), which MLflow 3 builds only
    with ``MLFLOW_ALLOW_FILE_STORE=true``: the tracker sets it, MLflow's client reads it back."""
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # restored after the test
    config = load_config(
        make_config(
            schedule={"max_steps": 2},
            evaluation={"every": 2},
            trainer={"trackers": ["mlflow_file"], "log_every": 1},
        )
    )
    run = tmp_path / "runs" / "tiny"
    train(config)
    assert (tmp_path / "runs" / "mlruns").is_dir() and not (
        tmp_path / "runs" / "mlflow.db"
    ).exists()
    client = MlflowClient(tracking_uri=(tmp_path / "runs" / "mlruns").resolve().as_uri())
    stored = client.get_run(json.loads((run / "trackers.json").read_text())["mlflow_file"])
    assert stored.info.run_name == "tiny" and stored.info.status == "FINISHED"
    assert json.loads(stored.data.params["loss.neg_margin"]) == 0.5
    records = MetricsLog(run / "metrics.jsonl").read()
    losses = [(r["step"], r["loss"]) for r in records if r.get("split", "train") == "train"]
    history = client.get_metric_history(stored.info.run_id, "train/loss")
    assert [(m.step, m.value) for m in history] == [(s, pytest.approx(v)) for s, v in losses]
    final = next(r for r in records if r.get("final"))
    assert stored.data.metrics["test_final/map_at_r"] == pytest.approx(final["map_at_r"])


def test_wandb_offline_run_holds_the_config_and_every_metric(make_config, tmp_path, monkeypatch):
    from tests.helpers.wandb_offline import read_offline_run

    monkeypatch.setenv("WANDB_SILENT", "true")
    config = load_config(
        make_config(
            schedule={"max_steps": 4}, evaluation={"every": 2}, trainer={"trackers": ["wandb"]}
        )
    )
    run = tmp_path / "runs" / "tiny"
    train(config)
    offline = read_offline_run(run)
    assert offline["run"]["name"] == "tiny" and offline["run"]["project"] == "gspdml"
    assert offline["run"]["id"] == json.loads((run / "trackers.json").read_text())["wandb"]
    assert offline["config"]["loss"]["neg_margin"] == 0.5
    records = MetricsLog(run / "metrics.jsonl").read()
    val = [r["map_at_r"] for r in records if r.get("split") == "val"]
    logged = [h for h in offline["history"] if "val/map_at_r" in h]
    assert [h["_step"] for h in logged] == [2, 4]
    assert [h["val/map_at_r"] for h in logged] == pytest.approx(val)

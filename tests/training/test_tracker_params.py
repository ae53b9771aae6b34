"""MLflow stores parameter values of at most 6000 characters: a longer one (a long
``description``) is cut with a note that says so, how long it was and where the whole value is;
it used to be cut to its first 6000 characters, unmarked."""

from __future__ import annotations

from gspdml.config import load_config
from gspdml.training.trackers import MlflowFileTracker, config_params, mlflow_uri


def test_a_parameter_longer_than_mlflow_stores_is_cut_with_a_note(
    make_config, tmp_path, monkeypatch
):
    """Read back from MLflow's file store (its SQLite store takes seconds to create)."""
    from mlflow.tracking import MlflowClient

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)  # restored after the test

    description = "".join(f"{i:05d} " for i in range(1500))  # 9000 characters
    config = load_config(make_config(description=description))
    run_dir = tmp_path / "runs" / "tiny"
    run_dir.mkdir(parents=True)
    tracker = MlflowFileTracker(config, run_dir)
    tracker.close()
    client = MlflowClient(tracking_uri=mlflow_uri((tmp_path / "runs").resolve(), "file"))
    params = client.get_run(tracker.run_id).data.params
    whole = config_params(config)["description"]
    note = f"... [cut: {len(whole)} characters; the whole value is in config.yaml]"
    assert len(params["description"]) == 6000 and params["description"].endswith(note)
    assert whole.startswith(params["description"][: -len(note)])
    assert params["loss.neg_margin"] == "0.5"  # short values whole

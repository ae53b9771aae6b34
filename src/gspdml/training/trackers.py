"""Experiment trackers, offline: every record of ``metrics.jsonl`` is also sent to the trackers
``trainer.trackers`` names, as ``SPLIT/KEY`` at its step, with the resolved config as parameters.

- ``mlflow``: the local store ``sqlite:///<output_dir>/mlflow.db`` (MLflow 3's local store),
  experiment ``gspdml``, one MLflow run per gspdml run; artifacts under
  ``<output_dir>/mlflow-artifacts``. A parameter longer than MLflow stores (6000 characters) is
  cut with a note saying so (:func:`mlflow_params`).
- ``mlflow_file``: the same in MLflow's file store, ``<output_dir>/mlruns``. MLflow 3 refuses it
  unless ``MLFLOW_ALLOW_FILE_STORE=true``; this tracker sets that variable for the process when
  it is unset.
- ``wandb``: Weights & Biases offline under ``<run_dir>/wandb`` (``wandb sync`` uploads it).

A resumed run continues the same tracker run (ids in ``<run_dir>/trackers.json``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from gspdml.config import RunConfig
from gspdml.dotted_keys import dotted_keys
from gspdml.errors import ConfigError
from gspdml.output_files import atomic_write_text, json_text
from gspdml.settings.schema import plain
from gspdml.training.metrics_log import scalars
from gspdml.training.run_dir import CONFIG_FILE

TRACKERS_FILE = "trackers.json"
PROJECT = "gspdml"
#: the longest parameter value MLflow stores (``mlflow.utils.validation.MAX_PARAM_VAL_LENGTH``)
MLFLOW_PARAM_LENGTH = 6000


class Tracker(Protocol):
    def log(self, record: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def config_params(config: RunConfig) -> dict[str, str]:
    """The resolved config as tracker parameters: ``{dotted key: JSON of its value}``, keyed by
    :func:`gspdml.dotted_keys.dotted_keys` (an empty mapping is the parameter ``{}``, a list one
    parameter)."""
    return {key: json_text(value) for key, value in dotted_keys(plain(config)).items()}


def mlflow_params(config: RunConfig) -> dict[str, str]:
    """:func:`config_params` as MLflow stores them: a value longer than
    :data:`MLFLOW_PARAM_LENGTH` characters keeps its start and ends saying that it was cut, how
    long it is and where the whole value is (the run's ``config.yaml``), never cut unmarked."""
    out = {}
    for key, value in config_params(config).items():
        if len(value) > MLFLOW_PARAM_LENGTH:
            note = f"... [cut: {len(value)} characters; the whole value is in {CONFIG_FILE}]"
            value = value[: MLFLOW_PARAM_LENGTH - len(note)] + note
        out[key] = value
    return out


def _ids(run_dir: Path) -> dict[str, str]:
    path = run_dir / TRACKERS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _keep_id(run_dir: Path, name: str, run_id: str) -> None:
    atomic_write_text(run_dir / TRACKERS_FILE, json_text({**_ids(run_dir), name: run_id}) + "\n")


def mlflow_uri(root: Path, store: str) -> str:
    """The tracking URI of the MLflow store ``store`` (``sqlite`` or ``file``) in ``root``."""
    if store == "file":
        return (root / "mlruns").as_uri()
    return f"sqlite:///{root / 'mlflow.db'}"


class MlflowTracker:
    """One MLflow run in the local store of ``output_dir`` (module doc): SQLite, or MLflow's
    file store with ``store="file"``."""

    name, store = "mlflow", "sqlite"  # the tracker's name (its id's key in trackers.json)

    def __init__(self, config: RunConfig, run_dir: Path):
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        root = Path(config.output_dir).resolve()
        root.mkdir(parents=True, exist_ok=True)
        if self.store == "file":  # MLflow 3 builds a file store only when allowed
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = MlflowClient(tracking_uri=mlflow_uri(root, self.store))
        found = self.client.get_experiment_by_name(PROJECT)
        experiment = (
            found.experiment_id
            if found is not None
            else self.client.create_experiment(
                PROJECT, artifact_location=str(root / "mlflow-artifacts")
            )
        )
        known = _ids(run_dir).get(self.name)
        if known is None:
            run = self.client.create_run(
                experiment, run_name=config.name, tags={"gspdml_run_dir": str(run_dir.resolve())}
            )
            self.run_id = run.info.run_id
            _keep_id(run_dir, self.name, self.run_id)
            params = [Param(k, v) for k, v in mlflow_params(config).items()]
            for start in range(0, len(params), 100):
                self.client.log_batch(self.run_id, params=params[start : start + 100])
        else:
            self.run_id = known

    def log(self, record: Mapping[str, Any]) -> None:
        from mlflow.entities import Metric

        step, values = scalars(record)
        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, step) for key, value in values.items()]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


class MlflowFileTracker(MlflowTracker):
    """One MLflow run in MLflow's file store, ``<output_dir>/mlruns`` (module doc)."""

    name, store = "mlflow_file", "file"


class WandbTracker:
    """One offline W&B run under ``<run_dir>/wandb`` (module doc)."""

    def __init__(self, config: RunConfig, run_dir: Path):
        import wandb

        known = _ids(run_dir).get("wandb")
        self.run = wandb.init(
            project=PROJECT,
            name=config.name,
            dir=str(run_dir),
            mode="offline",
            config=plain(config),
            id=known,
            resume="allow" if known else None,
        )
        if known is None:
            _keep_id(run_dir, "wandb", self.run.id)

    def log(self, record: Mapping[str, Any]) -> None:
        step, values = scalars(record)
        if values:
            self.run.log(values, step=step)

    def close(self) -> None:
        import wandb

        self.run.finish()
        wandb.teardown()  # the service writes the run file to its end before it exits


TRACKERS: dict[str, Callable[[RunConfig, Path], Tracker]] = {
    "mlflow": MlflowTracker,
    "mlflow_file": MlflowFileTracker,
    "wandb": WandbTracker,
}


def open_trackers(config: RunConfig, run_dir: Path) -> list[Tracker]:
    """The trackers ``config.trainer.trackers`` names, started; a missing package is a
    :class:`ConfigError` naming the extra."""
    trackers: list[Tracker] = []
    for name in config.trainer.trackers:
        try:
            trackers.append(TRACKERS[name](config, Path(run_dir)))
        except ImportError:
            extra = name.split("_")[0]  # mlflow_file: the mlflow extra
            raise ConfigError(
                "trainer.trackers", f"{extra} is not installed: pip install 'gspdml[{extra}]'"
            ) from None
    return trackers

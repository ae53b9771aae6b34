"""Reading an offline W&B run file (``run-<id>.wandb``) with W&B's own reader: ``wandb leet
inspect --json FILE`` (W&B's Go core, shipped with the ``wandb`` package) prints each record of
the run's transaction log as one JSON line. (The Python reader W&B once shipped,
``wandb.sdk.internal.datastore``, is gone from its current releases.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def read_offline_run(folder: Path) -> dict[str, Any]:
    """``{"history": [{key: value}], "config": {key: value}, "run": {"id", "name", "project"}}``
    of the one offline run under ``folder`` (``…/wandb/offline-run-*/``)."""
    (path,) = Path(folder).glob("wandb/offline-run-*/run-*.wandb")
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_ERROR_REPORTING": "false"}
    shown = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    out: dict[str, Any] = {"history": [], "config": {}, "run": {}}
    for line in shown.stdout.splitlines():
        record = json.loads(line)
        kind = record["type"]
        if kind == "history":
            out["history"].append(record["history"]["item"])
        elif kind == "config":
            out["config"].update(record["config"].get("update", {}))
        elif kind == "run":
            run = record["run"]
            out["run"] = {
                "id": run["run_id"],
                "name": run["display_name"],
                "project": run["project"],
            }
            out["config"].update(run.get("config", {}).get("update", {}))
    return out

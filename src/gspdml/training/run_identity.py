"""One run per folder: a run directory holds the files of one run, and its ``results.json``
says which weights and config they are.

- :func:`check_no_other_run`: ``gspdml train`` (without ``--resume``) refuses a folder that
  already holds a run's results or weights, or a protocol's table (``protocol.json``); a
  protocol (:mod:`gspdml.workflows.protocol`, also under ``gspdml reproduce``) refuses a root
  folder that holds a single run (:func:`check_not_a_run`). Only resuming the same run
  (``--resume``: same config and data, :mod:`gspdml.training.config_changes`) writes into a
  folder with a run in it.
- :func:`identity`: ``results.json`` records the SHA-256 of the saved weights and of
  ``config.yaml``; :func:`gspdml.training.run_dir.check_results_match` refuses weights or a config that disagree with
  it (``gspdml evaluate`` once scored an older model whose folder a protocol had written its
  ``results.json`` into).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gspdml.errors import ConfigError
from gspdml.file_digest import file_sha256
from gspdml.training.run_dir import CHECKPOINT_FILE, CONFIG_FILE, RESULTS_FILE, WEIGHTS_FILE

#: the file of a protocol's numbers in its root folder (:mod:`gspdml.workflows.protocol`)
PROTOCOL_FILE = "protocol.json"


def identity(run_dir: Path) -> dict[str, Any]:
    """What ``results.json`` records of the run's weights and config."""
    return {
        "weights_sha256": file_sha256(Path(run_dir) / WEIGHTS_FILE),
        "config_sha256": file_sha256(Path(run_dir) / CONFIG_FILE),
    }


def check_no_other_run(run_dir: Path) -> None:
    """Refuse to start a run in a folder holding another run's results or weights, or a
    protocol's table."""
    held = [f for f in (RESULTS_FILE, WEIGHTS_FILE, PROTOCOL_FILE) if (Path(run_dir) / f).exists()]
    if held:
        raise ConfigError(
            "name",
            f"{run_dir} holds another run's files ({', '.join(held)}); choose another name or "
            "output_dir (or delete the folder) to start a run there",
        )


def check_not_a_run(root: Path) -> None:
    """Refuse a protocol root folder that holds a single run (``gspdml train``'s files)."""
    held = [f for f in (CONFIG_FILE, WEIGHTS_FILE, CHECKPOINT_FILE) if (Path(root) / f).exists()]
    if held:
        raise ConfigError(
            "output_dir",
            f"{root} holds a run ({', '.join(held)}), not a protocol's models; give the protocol "
            "another --output-dir or name",
        )

"""One run per folder: ``gspdml train`` (without ``--resume``) refuses a folder holding another
run or a protocol's table, a protocol refuses a root holding a single run, and ``results.json``
records the SHA-256 of the weights and config
(:func:`gspdml.training.run_dir.check_results_match` checks them)."""

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
    _refuse_held(
        run_dir,
        (RESULTS_FILE, WEIGHTS_FILE, PROTOCOL_FILE),
        "name",
        "{folder} holds another run's files ({held}); choose another name or output_dir (or "
        "delete the folder) to start a run there",
    )


def check_not_a_run(root: Path) -> None:
    """Refuse a protocol root folder that holds a single run (``gspdml train``'s files)."""
    _refuse_held(
        root,
        (CONFIG_FILE, WEIGHTS_FILE, CHECKPOINT_FILE),
        "output_dir",
        "{folder} holds a run ({held}), not a protocol's models; give the protocol another "
        "--output-dir or name",
    )


def _refuse_held(folder: Path, files: tuple[str, ...], field: str, message: str) -> None:
    held = [f for f in files if (Path(folder) / f).exists()]
    if held:
        raise ConfigError(field, message.format(folder=folder, held=", ".join(held)))

"""The one runner of the package: train a list of planned runs (configs × seeds), each into its
own run directory, with one rule for what an existing run directory means.

The reuse rule (every workflow follows it: protocols, sweeps, the demo, the experiments):

1. a run directory whose ``config.yaml`` differs from the requested config in a key that changes
   the weights (any key but :data:`gspdml.training.config_changes.HARMLESS`: description,
   output_dir, loader workers, device, progress, logging) holds *another* run: it is refused with
   a :class:`~gspdml.errors.ConfigError` naming the differing keys, never overwritten silently
   (an option added after the run was written counts as equal at its default, as for ``--resume``);
2. the same config and a ``results.json``: the run finished; it is reused as is ("done");
3. the same config and a checkpoint (``checkpoints/last.safetensors``): it is resumed
   ("resumed"; harmless differences are accepted and written to its ``config.yaml``);
4. anything else (no directory, or one that never reached a checkpoint): it is trained ("trained").

``fresh=True`` is the caller's explicit "retrain from scratch": the run's directory is deleted
first (``gspdml demo --fresh``, sweeps, experiments run without ``--reuse``), when it is a run's
folder (it holds a ``config.yaml``) or empty; a folder of other files, or a link, is refused.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from gspdml.config import RunConfig, parse_yaml, validated
from gspdml.errors import ConfigError
from gspdml.training.config_changes import HARMLESS, config_differences
from gspdml.training.run_dir import CHECKPOINT_FILE, CONFIG_FILE, RESULTS_FILE, read_results

STATUSES = ("trained", "resumed", "done")


@dataclass(frozen=True)
class PlannedRun:
    """One run to train: a name for tables and logs, its resolved config and its directory."""

    name: str
    config: RunConfig
    run_dir: Path


@dataclass(frozen=True)
class Outcome:
    """What :func:`run_planned` did with a run: ``status`` in :data:`STATUSES`, the run's
    ``results.json`` content, and the wall time of this call's training (None when reused)."""

    run: PlannedRun
    status: str
    results: dict[str, Any]
    seconds: Optional[float]


def seed_plan(
    config: RunConfig,
    seeds: Sequence[int],
    run_dir: Callable[[int], Path],
    name: Callable[[int], str] = str,
) -> list[PlannedRun]:
    """``config`` once per seed (``seed`` set), into ``run_dir(seed)``, named ``name(seed)``."""
    return [
        PlannedRun(name(int(s)), dataclasses.replace(config, seed=int(s)), Path(run_dir(int(s))))
        for s in seeds
    ]


def existing_status(run: PlannedRun, hint: str = "delete it or choose another --output-dir") -> str:
    """What the reuse rule does with ``run``'s directory: "done", "resumed" or "trained"; raises
    :class:`ConfigError` (ending with ``hint``) when it holds a run of another config."""
    saved = run.run_dir / CONFIG_FILE
    if saved.is_file():
        # the requested config as the trainer writes it (dataset defaults filled in)
        differences = config_differences(parse_yaml(saved.read_text()) or {}, validated(run.config))
        changed = [key for key in differences if key not in HARMLESS]
        if changed:
            raise ConfigError(
                "config",
                f"{run.run_dir} holds a run of another config (differs in {', '.join(changed[:5])}); {hint}",
            )
    if (run.run_dir / RESULTS_FILE).is_file():
        return "done"
    return "resumed" if (run.run_dir / CHECKPOINT_FILE).is_file() else "trained"


def run_planned(
    run: PlannedRun,
    *,
    fresh: bool = False,
    hint: str = "delete it or choose another --output-dir",
    before_training: Callable[[PlannedRun], None] = lambda run: None,
) -> Outcome:
    """Train, resume or reuse ``run`` by the module's rule (``fresh``: delete its directory
    first). ``before_training(run)`` is called when the run is about to (re)train, e.g. to drop
    files derived from an earlier model."""
    from gspdml.training import train

    if fresh:
        _remove_run_dir(run.run_dir)
    status = existing_status(run, hint)
    if status == "done":
        return Outcome(run, status, read_results(run.run_dir) or {}, None)
    before_training(run)
    start = time.perf_counter()
    resumed = status == "resumed"
    results = train(run.config, run.run_dir, resume=resumed, allow_changes=resumed)
    return Outcome(run, status, results, time.perf_counter() - start)


def _remove_run_dir(run_dir: Path) -> None:
    """Delete ``run_dir`` for a fresh run, when it is a gspdml run's folder (it holds a
    ``config.yaml``) or empty; a folder of other files, or a link, is the user's: not deleted."""
    if not os.path.lexists(run_dir):
        return
    if run_dir.is_symlink() or not run_dir.is_dir():
        raise ConfigError(
            "output_dir",
            f"{run_dir} is a {'link' if run_dir.is_symlink() else 'file'}, not a run folder: "
            "not deleted; move it or choose another --output-dir",
        )
    if not (run_dir / CONFIG_FILE).is_file() and any(run_dir.iterdir()):
        raise ConfigError(
            "output_dir",
            f"{run_dir} holds files but no gspdml run ({CONFIG_FILE}): not deleted for a fresh "
            "run; move them or choose another --output-dir",
        )
    shutil.rmtree(run_dir)

"""What a trainer checks before it writes into a run directory or resumes one: the folder, the
config (:mod:`gspdml.training.config_changes`), the data
(:mod:`gspdml.training.data_fingerprint`) and the checkpoint's shapes."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch import nn

from gspdml.config import parse_yaml, validated
from gspdml.errors import ConfigError, DataError, GspdmlError
from gspdml.output_files import check_writable_folder
from gspdml.settings.sections import RunConfig
from gspdml.training.component_options import check_same_options
from gspdml.training.config_changes import check_resume_config
from gspdml.training.data_fingerprint import differences
from gspdml.training.run_dir import (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    DATA_FILE,
    DATA_RECORD_FIX,
    read_data_record,
)
from gspdml.training.run_identity import check_no_other_run


def _resolved(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """``config`` with this version's defaults filled in; as given if it does not load."""
    try:
        return validated(config)
    except GspdmlError:
        return config


def run_dir_changes(
    run_dir: Path, config: RunConfig, resume: bool, allow_changes: bool
) -> dict[str, tuple[Any, Any]]:
    """Refuse a run directory that holds a run (unless resuming), nothing to resume, another
    config, or that cannot be written; returns the allowed changes ``{key: (old, new)}``."""
    checkpoint = run_dir / CHECKPOINT_FILE
    if not resume and checkpoint.exists():
        raise ConfigError(
            "name", f"{run_dir} already holds a run; resume it (--resume) or choose another name"
        )
    if resume and not checkpoint.exists():
        raise ConfigError("name", f"nothing to resume: no checkpoint in {run_dir}")
    changed: dict[str, tuple[Any, Any]] = {}
    if resume:
        saved_path = run_dir / CONFIG_FILE
        saved = parse_yaml(saved_path.read_text()) if saved_path.is_file() else {}
        changed = check_resume_config(_resolved(saved), _resolved(config), allow_changes)
        check_same_options(run_dir, config)
    else:
        check_no_other_run(run_dir)
    check_writable_folder(run_dir)  # before any work: a read-only or impossible run directory
    return changed


def check_same_data(run_dir: Path, record: dict[str, Any]) -> None:
    """``--resume`` on the data the run started on (``data.json``)."""
    saved = read_data_record(run_dir)
    if saved is None:
        return
    try:
        changes = differences(saved, record)
    except (AttributeError, KeyError, TypeError, ValueError) as err:  # a field of another type
        raise DataError(
            f"{run_dir / DATA_FILE}: not a data record gspdml wrote ({err}); {DATA_RECORD_FIX}"
        ) from None
    if changes:
        raise ConfigError(
            "--resume",
            f"the data changed since {run_dir} started: {'; '.join(changes)}. Resume on "
            "the data it trained on, start a new run, or pass --allow-data-change to continue "
            "on this data",
        )


def check_checkpoint_shapes(
    state: Mapping[str, Any], parts: Mapping[str, nn.Module], run_dir: Path, classes: int
) -> None:
    """The checkpoint's parameters of ``parts`` have this run's shapes (a proxy per class
    differs after ``--allow-data-change``); ``classes``: the training classes now (0: unknown)."""
    changed = [
        f"{part}.{name}: {tuple(saved.shape)} in the checkpoint, {tuple(own[name].shape)} now"
        for part, module in parts.items()
        for own in [dict(module.named_parameters())]  # buffers may size themselves (XBM)
        for name, saved in state[part].items()
        if name in own and own[name].shape != saved.shape
    ]
    if changed:
        raise ConfigError(
            "--allow-data-change",
            f"{run_dir} cannot continue on this data: {'; '.join(changed)}. Its loss "
            "or model holds a tensor with one row per training class (a proxy loss's "
            f"proxies), and the data now has {classes or 'another number of'} training classes. "
            "Resume on the classes it trained on, or start a new run (with model.init_from "
            "pointing at this run once it has finished, to start from its weights)",
        )

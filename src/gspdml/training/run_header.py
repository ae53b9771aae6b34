"""What a run writes before step 1 (rank 0): the resolved config, the data record, the
environment and the components' options, its logs opened at the current step, and the header
on stderr: where the run goes, on what, and on which data."""

from __future__ import annotations

import sys
from typing import Any

from gspdml.config import dump_config
from gspdml.data.summary import describe_splits, image_size_note, ranking_problem
from gspdml.output_files import atomic_write_text, json_text
from gspdml.training.component_options import write_options
from gspdml.training.run_dir import CONFIG_FILE, DATA_FILE, TENSORBOARD_DIR
from gspdml.training.run_plugins import recorded_plugins
from gspdml.training.run_record import environment_record, write_environment
from gspdml.training.tensorboard_extras import TensorBoardExtras
from gspdml.training.trackers import open_trackers
from gspdml.training.trainer_view import TrainerView

Changes = dict[str, tuple[Any, Any]]


def open_run_dir(trainer: TrainerView, resume: bool, changed: Changes, notes: list[str]) -> None:
    """``config.yaml`` (rewritten on resume only when changed), ``data.json``, the environment,
    the components' options, the logs from the current step on, then the header."""
    run_dir, config = trainer.run_dir, trainer.config
    if not resume or changed:
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(run_dir / CONFIG_FILE, dump_config(config))
    atomic_write_text(run_dir / DATA_FILE, json_text(trainer.data_record, indent=1))
    record = environment_record(trainer.device, trainer.precision, recorded_plugins(config))
    write_environment(run_dir, record, resume)
    write_options(run_dir, config)
    start = trainer.step if resume else -1
    trainer.log.truncate_after(start)
    trainer.timing_log.truncate_after(start)
    if trainer.tensorboard:
        trainer.log.open_tensorboard(start)
    trainer.log.sinks = open_trackers(config, run_dir)
    if trainer.tensorboard:
        trainer.log.sinks.append(TensorBoardExtras(trainer))
    for line in header_lines(trainer, resume, changed, notes):
        print(f"gspdml: {line}", file=sys.stderr)


def header_lines(
    trainer: TrainerView, resume: bool, changed: Changes, notes: list[str]
) -> list[str]:
    """The header's lines (without the ``gspdml:`` prefix)."""
    config, run_dir, batches = trainer.config, trainer.run_dir, trainer.batches
    tr, choice = config.trainer, trainer.runtime.precision_choice
    every = f"every {tr.checkpoint_every} steps and " if tr.checkpoint_every else ""
    board = f"on: {run_dir / TENSORBOARD_DIR}" if trainer.tensorboard else "off"
    lines = [
        f"{'resuming' if resume else 'run'} {run_dir.resolve()} at step {trainer.step} on "
        f"{trainer.device}, precision {choice.precision} ({choice.reason})",
        f"tensorboard {board}, checkpoint {every}at every evaluation",
        *(f"changed on resume: {key}: {old!r} -> {new!r}" for key, (old, new) in changed.items()),
        *notes,
        *describe_splits(trainer.data),
    ]
    auto = " (data.classes_per_batch: auto)" if config.data.classes_per_batch == "auto" else ""
    lines.append(
        f"batches of {batches.classes_per_batch} classes x {batches.samples_per_class} images{auto}"
    )
    size = image_size_note(trainer.train_dataset, config.data.dataset)
    lines += [size] if size else []
    if not trainer.selects:
        lines.append(
            f"the {config.evaluation.split} split cannot rank "
            f"({ranking_problem(trainer.eval_split)}): training without model selection; the "
            "final weights are those of the last step"
        )
    return lines

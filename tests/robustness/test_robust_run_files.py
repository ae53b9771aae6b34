"""A run folder's appended and replaced files under real faults: a full disk while appending to
``metrics.jsonl`` cuts nothing and fails with an error naming the file; a torn last line (left by
a kill, or by an older gspdml on a full disk) is left out with a warning and ``--resume``
continues from the intact checkpoint; a SIGKILL while a checkpoint is written leaves a hidden
temporary file, which the resumed run removes."""

import json
import shutil
import warnings

import pytest

from gspdml.errors import DataError, GspdmlError
from gspdml.output_files import OutputError
from gspdml.training import Trainer, train
from gspdml.training.metrics_log import MetricsLog
from gspdml.training.run_dir import CHECKPOINT_FILE
from tests.helpers import stopped_runs
from tests.robustness.faults import KILL_AFTER_SAVE_FILE, file_size_limit, run_python


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory):
    """``(config, run_dir)`` of a run stopped at step 3 of 4, checkpointed at step 2."""
    tmp = tmp_path_factory.mktemp("stopped")
    return stopped_runs.stopped_run(
        stopped_runs.training_images(tmp / "images"),
        tmp / "runs" / "run",
        trainer={"log_every": 1},
        evaluation=stopped_runs.EVALUATE_AT_STEP_2,
    )


@pytest.fixture
def run(stopped_run, tmp_path):
    config, run_dir = stopped_run
    return config, shutil.copytree(run_dir, tmp_path / "run")


def test_a_full_disk_while_appending_a_metrics_record_cuts_nothing(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for step in range(40):
        log.write({"step": step, "split": "train", "loss": 1.0 / (step + 1)})
    before = log.path.read_bytes()
    with file_size_limit(len(before) + 20), pytest.raises(OutputError) as failure:
        log.write({"step": 40, "split": "train", "loss": 0.5, "note": "x" * 100})
    assert str(failure.value).startswith(f"cannot append to {log.path}: File too large")
    assert isinstance(failure.value, GspdmlError)  # `gspdml train` prints it as an error
    assert log.path.read_bytes() == before  # no torn line
    assert [r["step"] for r in log.read()] == list(range(40))


def test_a_torn_last_metrics_line_is_left_out_and_resume_continues(run):
    config, run_dir = run
    metrics = run_dir / "metrics.jsonl"
    with metrics.open("a") as handle:  # what a kill in the middle of an append leaves
        handle.write('{"step": 4, "split": "train", "lo')
    with pytest.warns(RuntimeWarning, match=r"metrics.jsonl: the last line \(\d+\) is torn"):
        resumed = Trainer.from_config(config, run_dir, resume=True)
    assert resumed.step == 2
    assert resumed.fit()["steps"] == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the resumed run rewrote the file whole
        records = MetricsLog(metrics).read()
    assert [r["step"] for r in records if r.get("split") == "train"] == [1, 2, 3, 4]


def test_a_kill_while_checkpointing_leaves_a_temporary_file_that_resume_removes(run):
    config, run_dir = run
    checkpoint = run_dir / CHECKPOINT_FILE
    before = checkpoint.read_bytes()
    child = run_python(
        KILL_AFTER_SAVE_FILE
        + f"""
import torch
import gspdml.training.checkpoint as checkpoint_module
kill_after(checkpoint_module)  # SIGKILL once the temporary file is written, before the rename
checkpoint_module.save_state({str(checkpoint)!r}, {{"weights": torch.zeros(1000)}})
"""
    )
    assert child.returncode == -9, child.stderr
    stale = [p for p in checkpoint.parent.iterdir() if p.name.startswith(".last.safetensors.")]
    assert len(stale) == 1 and stale[0].name.endswith(".tmp")
    assert checkpoint.read_bytes() == before  # the kill came before the rename
    resumed = Trainer.from_config(config, run_dir, resume=True)
    assert not stale[0].exists() and resumed.step == 2
    assert resumed.fit()["steps"] == 4
    assert not [p for p in run_dir.rglob("*") if p.name.endswith(".tmp")]


@pytest.mark.parametrize("step", ["missing", "3", True, -1])
def test_a_metrics_record_without_a_step_is_named_with_its_line(tmp_path, step):
    """Hardening item 18: a record without an integer ``step`` was read as is (the report and
    resume order records by step); the one reader names the file and the line."""
    record = {"split": "val", "map_at_r": 0.5} | ({} if step == "missing" else {"step": step})
    path = tmp_path / "metrics.jsonl"
    path.write_text(json.dumps({"step": 0, "split": "train"}) + "\n" + json.dumps(record) + "\n")
    with pytest.raises(DataError, match=rf"{path}:2: every record has a step"):
        MetricsLog(path).read()


def test_a_metrics_log_that_is_a_link_is_never_appended_through(tmp_path):
    """issue 39, sibling of defect 1: a received run folder whose metrics.jsonl is a link."""
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.jsonl").symlink_to(victim)
    log = MetricsLog(tmp_path / "run" / "metrics.jsonl")
    with pytest.raises(OutputError, match=r"metrics\.jsonl: it is a symbolic link"):
        log.write({"step": 1, "split": "train", "loss": 0.5})
    assert victim.read_text() == "the user's file\n"
    log.truncate_after(-1)  # as a run starting in the folder does: the link is replaced
    log.write({"step": 1, "split": "train", "loss": 0.5})
    assert victim.read_text() == "the user's file\n" and len(log.read()) == 1


def test_a_received_run_whose_checkpoints_folder_is_a_link_is_refused(run, tmp_path):
    """issue 39, sibling of defect 1: ``--resume`` on a received run folder whose
    ``checkpoints`` is a link would write the checkpoint into the folder it names."""
    config, run_dir = run
    outside = tmp_path / "outside"
    shutil.move(run_dir / "checkpoints", outside)
    (run_dir / "checkpoints").symlink_to(outside)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    with pytest.raises(
        OutputError, match=r"checkpoints is a symbolic link .*replace it by the folder"
    ):
        train(config, run_dir, resume=True)
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before

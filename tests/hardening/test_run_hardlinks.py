"""Held attack (no defect): a run folder copied with hard links (``cp -al``, ``rsync
--link-dest``: cheap snapshots) and then resumed never changes a file it shares with the
snapshot. Its shared lock file is refused first; once removed, the resume rewrites its logs
atomically (a new file, one name) before appending, and replaces its checkpoint by renaming."""

import os
import shutil
from pathlib import Path

import pytest

from gspdml.config import load_config
from gspdml.training import Trainer
from gspdml.training.callbacks import Callback
from gspdml.training.run_dir import METRICS_FILE
from gspdml.training.run_lock import LOCK_FILE, FolderLock, LockFileRefused
from tests.helpers.images import folder_config, image_folder


class StopAt(Callback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer):
        if trainer.step == self.step:
            raise RuntimeError("stopped by the test")


def _stopped_run(tmp_path):
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4, "c": 4}, test={"d": 2, "e": 2})
    config = load_config(
        {
            **folder_config(root, tmp_path / "runs"),
            "schedule": {"max_steps": 4},
            "evaluation": {"every": 2, "split": "test", "patience": None, "recall_at": [1]},
        }
    )
    trainer = Trainer.from_config(config, tmp_path / "runs" / "run", callbacks={"s": StopAt(3)})
    with pytest.raises(RuntimeError, match="stopped by the test"):
        trainer.fit()
    return config, trainer.run_dir


def _copy_with_hard_links(source, target):
    """``target``: ``source`` copied as ``cp -al`` does; the lock file it shares is refused first
    (tests/training/test_run_lock.py), so it is removed, as that error says."""
    shutil.copytree(source, target, copy_function=os.link)
    with pytest.raises(LockFileRefused, match="a file with 2 names"):
        FolderLock(source, "test")
    (source / LOCK_FILE).unlink()
    return target


def test_a_resumed_hard_linked_copy_never_changes_the_snapshot(tmp_path):
    config, run = _stopped_run(tmp_path)
    snapshot = _copy_with_hard_links(run, tmp_path / "snapshot")
    before = {p.relative_to(snapshot): p.read_bytes() for p in snapshot.rglob("*") if p.is_file()}
    Trainer.from_config(config, run, resume=True).fit()
    after = {p.relative_to(snapshot): p.read_bytes() for p in snapshot.rglob("*") if p.is_file()}
    assert after == before
    assert len((run / METRICS_FILE).read_bytes()) > len(before[Path(METRICS_FILE)])

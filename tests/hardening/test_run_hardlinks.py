"""Held attack (no defect): a run folder copied with hard links (``cp -al``, ``rsync
--link-dest``: cheap snapshots) and then resumed never changes a file it shares with the
snapshot. Its shared lock file is refused first; once removed, the resume rewrites its logs
atomically (a new file, one name) before appending, and replaces its checkpoint by renaming."""

import os
import shutil
from pathlib import Path

import pytest

from gspdml.training import Trainer
from gspdml.training.run_dir import METRICS_FILE
from gspdml.training.run_lock import LOCK_FILE, FolderLock, LockFileRefused
from tests.helpers.stopped_runs import EVALUATE_AT_STEP_2, stopped_run, training_images


def _copy_with_hard_links(source, target):
    """``target``: ``source`` copied as ``cp -al`` does; the lock file it shares is refused first
    (tests/training/test_run_lock.py), so it is removed, as that error says."""
    shutil.copytree(source, target, copy_function=os.link)
    with pytest.raises(LockFileRefused, match="a file with 2 names"):
        FolderLock(source, "test")
    (source / LOCK_FILE).unlink()
    return target


def test_a_resumed_hard_linked_copy_never_changes_the_snapshot(tmp_path):
    images = training_images(tmp_path / "images")
    config, run = stopped_run(images, tmp_path / "runs" / "run", evaluation=EVALUATE_AT_STEP_2)
    snapshot = _copy_with_hard_links(run, tmp_path / "snapshot")
    before = {p.relative_to(snapshot): p.read_bytes() for p in snapshot.rglob("*") if p.is_file()}
    Trainer.from_config(config, run, resume=True).fit()
    after = {p.relative_to(snapshot): p.read_bytes() for p in snapshot.rglob("*") if p.is_file()}
    assert after == before
    assert len((run / METRICS_FILE).read_bytes()) > len(before[Path(METRICS_FILE)])

"""A ``gspdml bundle`` killed (SIGKILL) while it fills its staging folder leaves that hidden
folder (``.OUT.<random>.tmp``, holding a copy of the weights) beside the bundle; the next write
of the same bundle removes it. Before, each killed write left one behind for good. A staging
folder that a running write holds (``flock``), or that holds anything but bundle files, is
never removed."""

import fcntl
import os
import signal

import pytest

from gspdml.retrieval.bundle import remove_killed_staging, write_bundle
from tests.helpers.retrieval import write_run
from tests.robustness.faults import run_python

KILLED_WRITE = """
import os, signal
from pathlib import Path
import gspdml.retrieval.bundle as bundle
def card_then_die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
bundle._model_card = card_then_die
bundle.write_bundle(Path({run!r}), Path({out!r}))
"""


def _staging(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".bundle."))


@pytest.mark.slow  # a child interpreter: seconds of imports on a busy machine
def test_a_killed_writes_staging_folder_is_removed_by_the_next_write(tmp_path):
    write_run(tmp_path / "run")
    done = run_python(KILLED_WRITE.format(run=str(tmp_path / "run"), out=str(tmp_path / "bundle")))
    assert done.returncode == -signal.SIGKILL, done.stderr
    [left] = _staging(tmp_path)
    assert (tmp_path / left / "model.safetensors").is_file()  # the weights' copy, left behind
    write_bundle(tmp_path / "run", tmp_path / "bundle")
    assert _staging(tmp_path) == []
    assert (tmp_path / "bundle" / "bundle.json").is_file()


def test_a_held_or_foreign_staging_folder_is_kept(tmp_path):
    out = tmp_path / "bundle"
    held, foreign = tmp_path / ".bundle.abcd1234.tmp", tmp_path / ".bundle.wxyz0987.tmp"
    for folder in (held, foreign):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(b"weights")
    (foreign / "notes.txt").write_text("the user's")
    fd = os.open(held, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # a write running now
        assert remove_killed_staging(out) == []
    finally:
        os.close(fd)
    assert remove_killed_staging(out) == [held]
    assert (foreign / "notes.txt").is_file()

"""A ``gspdml export`` killed (SIGKILL) while it writes leaves its temporary file
(``.embedder.pt.<random>.tmp``) in the export folder; the next export of the same file removes it.
Before, each killed export left one there for good. A temporary that a running write holds
(``flock``, as ``atomic_write`` holds its own while writing), a link, a folder named alike and
another file's temporary are kept. The rule is the bundle's (one helper,
``gspdml.output_files.remove_killed_temporaries``)."""

import os
import signal
from pathlib import Path

import pytest

from gspdml.output_files import atomic_write, hold, remove_killed_temporaries
from gspdml.retrieval.export import export_run
from tests.helpers.retrieval import write_run
from tests.robustness.faults import run_python

# the write export makes (atomic_write), killed half-way; the child never imports torch
KILLED_WRITE = """
import os, signal, sys
from pathlib import Path
from gspdml.output_files import atomic_write
def half_then_die(tmp):
    Path(tmp).write_bytes(bytes(4096))
    os.kill(os.getpid(), signal.SIGKILL)
atomic_write(Path({target!r}), half_then_die)
assert "torch" not in sys.modules
"""


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("name", ["embedder.pt", "embedder.pt.json"])
def test_a_killed_exports_temporary_is_removed_by_the_next_export(tmp_path, name):
    write_run(tmp_path / "run")
    export = tmp_path / "run" / "export"
    export.mkdir()
    done = run_python(KILLED_WRITE.format(target=str(export / name)))
    assert done.returncode == -signal.SIGKILL, done.stderr
    [left] = _temporaries(export)
    assert left.startswith(f".{name}.") and (export / left).stat().st_size == 4096
    path, _ = export_run(tmp_path / "run", "torchscript", check=False)
    assert _temporaries(export) == []
    assert sorted(p.name for p in export.iterdir()) == ["embedder.pt", "embedder.pt.json"]
    assert path.stat().st_size > 0


def test_a_held_temporary_and_look_alikes_are_kept(tmp_path):
    target = tmp_path / "embedder.pt"
    held, folder = tmp_path / ".embedder.pt.abcd1234.tmp", tmp_path / ".embedder.pt.wxyz0987.tmp"
    link, other = tmp_path / ".embedder.pt.lnk_4567.tmp", tmp_path / ".model.pt.abcd1234.tmp"
    outside = tmp_path / "outside.bin"
    for path in (held, other, outside):
        path.write_bytes(b"bytes")
    folder.mkdir()
    link.symlink_to(outside)
    fd = hold(held)  # a write running now
    try:
        assert remove_killed_temporaries(target) == []
    finally:
        os.close(fd)
    assert remove_killed_temporaries(target) == [held]
    assert folder.is_dir() and link.is_symlink() and outside.read_bytes() == b"bytes"
    assert other.is_file()


def test_atomic_write_holds_its_temporary_while_it_writes(tmp_path):
    target = tmp_path / "embedder.pt"
    seen = []

    def write(tmp):
        Path(tmp).write_bytes(b"model")
        seen.append(remove_killed_temporaries(target))  # another export starting meanwhile
        assert Path(tmp).is_file()

    atomic_write(target, write)
    assert seen == [[]] and target.read_bytes() == b"model"

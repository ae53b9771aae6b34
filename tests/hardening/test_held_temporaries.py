"""A temporary that a running write holds is never removed under it, from the moment the write
uses it.

1. ``remove_stale_temporaries`` (the one writer of a folder removing its killed writes'
   temporaries: the index folder's next generation, the trainer's run folder lock) ignored the
   locks: it removed a temporary a second process was writing, whose write then failed. Now
   both removers follow one rule: a temporary is removed only by one who holds it.
2. Between the creation of its temporary and its lock, a write's temporary was visible unheld:
   a remover that took it there (it cannot tell it from a killed write's) left the write writing
   under a name no lock covered, which any remover then removed. Now the write locks its new
   temporary, checks that the name still names it, and makes another when not
   (``new_held_temporary``, also the bundle's staging folder).

The writer is a real second process (``atomic_write``, or ``new_held_temporary`` for a folder as
the bundle writes one; it imports no torch) that stops and waits for this test at chosen points,
through two pipes: after writing half of its file, and for 2 at its first ``flock`` call, right
after its temporary's creation (a profile hook on that call; the library code runs unchanged).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gspdml.data.dataset_refresh import STAGING_PREFIX, recover_interrupted
from gspdml.output_files import hold, remove_killed_temporaries, remove_stale_temporaries
from gspdml.retrieval.bundle import FILES
from gspdml.retrieval.generations import MANIFEST_FILE, write_generation
from gspdml.training.run_lock import lock_run_folder
from tests.robustness.faults import ROOT

WRITER = """
import fcntl, os, sys
from pathlib import Path
from gspdml import output_files
target, report, resume, kind, at_creation = sys.argv[1:]
def pause(where):
    os.write(int(report), where.encode())
    if os.read(int(resume), 1) != b"g":
        sys.exit("the test stopped")
def stop_at_first_flock(frame, event, arg):
    if event == "c_call" and arg is fcntl.flock:
        sys.setprofile(None)
        pause("created")
def write(tmp):
    with open(tmp, "wb") as handle:
        handle.write(b"half ")
        handle.flush()
        pause("writing")
        handle.write(b"and whole")
if at_creation == "1":
    sys.setprofile(stop_at_first_flock)
if kind == "file":
    output_files.atomic_write(Path(target), write)
elif kind == "folder":  # a folder written whole, as write_bundle writes one
    held, staging = output_files.new_held_temporary(target, folder=True)
    write(staging / "bundle.json")
    output_files.replace_folder(staging, target)
    os.close(held)
else:  # a dataset fetch's extraction folder in the dataset root (its package imports torch)
    from gspdml.data.dataset_refresh import new_staging
    staging, held = new_staging(Path(target).parent, Path(target).name)
    write(staging / "images.txt")
    os.close(held)
assert kind == "extraction" or "torch" not in sys.modules
"""
WRITTEN = b"half and whole"
#: a temporary of ``notes.json`` that a killed write left
KILLED = ".notes.json.abcd1234.tmp"
#: a guard against a writer that never answers; no result depends on it
WAIT_S = 60


class PausedWriter:
    """The child writing ``target`` (a ``kind`` of ``"file"``, ``"folder"`` or ``"extraction"``,
    ``target`` naming the dataset), stopping where :data:`WRITER` says."""

    def __init__(self, target: Path, kind: str, at_creation: bool):
        self._report, report = os.pipe()  # the writer says where it stopped
        resume, self._resume = os.pipe()  # and waits for a byte on this one
        self.child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(target),
                str(report),
                str(resume),
                kind,
                "01"[at_creation],
            ],
            pass_fds=(report, resume),
            env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"},
            stderr=subprocess.PIPE,
        )
        os.close(report)
        os.close(resume)

    def reaches(self, where: str) -> None:
        ready, _, _ = select.select([self._report], [], [], WAIT_S)
        said = os.read(self._report, 64).decode() if ready else "nothing"
        if said != where:
            self.child.kill()
            raise AssertionError(f"the writer said {said}: {self.child.communicate()[1]!r}")

    def resume(self) -> None:
        os.write(self._resume, b"g")

    def finish(self) -> None:
        """Let the writer finish; it must succeed."""
        self.resume()
        _, err = self.child.communicate(timeout=WAIT_S)
        assert self.child.returncode == 0, err.decode()

    def stop(self) -> None:
        """Close the pipes (a writer still waiting exits) and reap the child."""
        for fd in (self._resume, self._report):
            os.close(fd)
        self.child.communicate(timeout=WAIT_S)


@pytest.fixture
def start_writer():
    """:class:`PausedWriter` ``(target, kind, at_creation)``, each stopped at the end of the
    test."""
    started: list[PausedWriter] = []

    def start(target: Path, kind: str = "file", at_creation: bool = False) -> PausedWriter:
        started.append(PausedWriter(target, kind, at_creation))
        return started[-1]

    yield start
    for writer in started:
        writer.stop()


def _temporaries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def _stale_remover(folder: Path) -> None:
    assert remove_stale_temporaries(folder) == [folder / KILLED]


def _next_generation(folder: Path) -> None:
    write_generation(folder, {"ids.json": lambda tmp: Path(tmp).write_text("[]")}, [])
    assert (folder / MANIFEST_FILE).is_file()


def _run_folder_lock(folder: Path) -> None:
    lock_run_folder(folder, ["checkpoints"], "the test").release()


@pytest.mark.parametrize(
    "remover",
    [_stale_remover, _next_generation, _run_folder_lock],
    ids=["remove_stale_temporaries", "index folder", "run folder"],
)
def test_a_temporary_a_running_write_holds_is_kept(
    tmp_path, start_writer, remover: Callable[[Path], None]
):
    target = tmp_path / "notes.json"
    (tmp_path / KILLED).write_bytes(b"a killed write's")  # held by nobody: removed
    writer = start_writer(target)
    writer.reaches("writing")
    [running] = [name for name in _temporaries(tmp_path) if name != KILLED]
    remover(tmp_path)
    assert _temporaries(tmp_path) == [running]  # the old code removed both
    assert (tmp_path / running).read_bytes() == b"half "
    writer.finish()
    assert target.read_bytes() == WRITTEN and _temporaries(tmp_path) == []


@pytest.mark.parametrize("remover_holds", [False, True], ids=["removed", "held"])
def test_a_temporary_taken_before_its_lock_is_never_written(tmp_path, start_writer, remover_holds):
    target = tmp_path / "embedder.pt"
    writer = start_writer(target, at_creation=True)
    writer.reaches("created")  # created, not yet locked: a remover may take it
    [created] = _temporaries(tmp_path)
    if remover_holds:  # the remover's steps, the write resuming meanwhile: hold, then remove
        held = hold(tmp_path / created)
        writer.resume()
        (tmp_path / created).unlink()
        os.close(held)
    else:
        assert remove_killed_temporaries(target) == [tmp_path / created]
        writer.resume()
    writer.reaches("writing")
    [used] = _temporaries(tmp_path)
    assert used != created  # the old code wrote under the removed name, held by nobody
    assert remove_stale_temporaries(tmp_path) == []
    assert remove_killed_temporaries(target) == []
    assert (tmp_path / used).read_bytes() == b"half "
    writer.finish()
    assert target.read_bytes() == WRITTEN and _temporaries(tmp_path) == []


def test_a_staging_folder_taken_before_its_lock_is_never_filled(tmp_path, start_writer):
    target = tmp_path / "bundle"
    writer = start_writer(target, kind="folder", at_creation=True)
    writer.reaches("created")
    [created] = _temporaries(tmp_path)  # empty: a killed bundle write's staging folder, alike
    assert remove_killed_temporaries(target, FILES) == [tmp_path / created]
    writer.resume()
    writer.reaches("writing")
    [used] = _temporaries(tmp_path)
    assert used != created
    assert remove_killed_temporaries(target, FILES) == []
    assert (tmp_path / used / "bundle.json").read_bytes() == b"half "
    writer.finish()
    assert (target / "bundle.json").read_bytes() == WRITTEN and _temporaries(tmp_path) == []


def test_an_extraction_folder_taken_before_its_lock_is_never_filled(tmp_path, start_writer):
    """A second fetch of the same dataset, starting while the first has created its extraction
    folder but not locked it yet, takes it for a killed fetch's and removes it; the first then
    makes another (the old code extracted into the removed folder and failed)."""
    writer = start_writer(tmp_path / "cub", kind="extraction", at_creation=True)
    writer.reaches("created")
    [created] = tmp_path.glob(f"{STAGING_PREFIX}cub.*")
    recover_interrupted(tmp_path, "cub")
    assert not created.exists()
    writer.resume()
    writer.reaches("writing")
    [used] = tmp_path.glob(f"{STAGING_PREFIX}cub.*")
    assert used != created
    recover_interrupted(tmp_path, "cub")  # held now: kept
    assert (used / "images.txt").read_bytes() == b"half "
    writer.finish()
    assert (used / "images.txt").read_bytes() == WRITTEN

"""Re-fetching a dataset never deletes a file it did not write (issue 39, defect 2).

Before, ``gspdml data fetch`` removed the extracted dataset folder with ``rmtree`` and renamed the
new extraction in its place: the user's files inside it (notes, an edited annotation) were gone
without a message, and a kill between the removal and the rename left no dataset at all. Now the
new extraction is built beside the old folder and swapped in whole (an atomic exchange); the old
folder's files that the new extraction reproduces byte for byte are removed, the user's added
files move into the new folder, and a file the user changed is kept in ``NAME.replaced-<time>``,
named in a warning. A kill at any point leaves a complete dataset, and the next fetch finishes
the clean-up of a killed one.
"""

import hashlib
import signal
from pathlib import Path

import pytest

from gspdml.data.fetch import Archive, DatasetSource, fetch
from tests.data.test_data_fetch import ARCHIVE, IMAGES, Server, count_check, md5
from tests.robustness.faults import run_python


@pytest.fixture
def server():
    s = Server()
    yield s
    s.close()


def _source(server) -> DatasetSource:
    server.files["/toy.tgz"] = ARCHIVE
    return DatasetSource(
        "toy", (Archive("toy.tgz", md5(ARCHIVE), server.url + "/toy.tgz"),), count_check(40)
    )


def _hidden(root: Path) -> list[str]:
    return sorted(
        p.name
        for p in root.iterdir()
        if p.name.startswith(".")
        and p.name != ".downloads"
        and not p.name.startswith(".gspdml-fetch-")
    )


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_a_refetch_keeps_the_users_files_in_the_dataset_folder(
    server, tmp_path, monkeypatch, exchange
):
    if not exchange:  # a system without renameat2: the old folder is renamed aside first
        monkeypatch.setattr("gspdml.output_files._exchange", lambda first, second: False)
    source = _source(server)
    assert fetch(source, tmp_path, progress=False) == 40
    (tmp_path / "Toy" / "my-notes.txt").write_text("which classes look odd\n")
    (tmp_path / "Toy" / "mine").mkdir()
    (tmp_path / "Toy" / "mine" / "labels.csv").write_text("path,label\n")
    edited = tmp_path / "Toy" / "images" / "003.jpg"
    edited.write_bytes(b"the user's own edit")
    with pytest.warns(UserWarning, match=r"changed 1 file.*images/003\.jpg.*Toy\.replaced-"):
        assert fetch(source, tmp_path, progress=False) == 40
    assert (tmp_path / "Toy" / "my-notes.txt").read_text() == "which classes look odd\n"
    assert (tmp_path / "Toy" / "mine" / "labels.csv").read_text() == "path,label\n"
    assert edited.read_bytes() == IMAGES["Toy/images/003.jpg"]  # the dataset is the archive's
    [kept] = list(tmp_path.glob("Toy.replaced-*"))
    assert (kept / "images" / "003.jpg").read_bytes() == b"the user's own edit"
    assert [p.name for p in kept.rglob("*") if p.is_file()] == ["003.jpg"]
    assert _hidden(tmp_path) == []  # no staging or set-aside folder left


def test_a_refetch_over_an_unchanged_dataset_leaves_nothing_aside(server, tmp_path):
    source = _source(server)
    fetch(source, tmp_path, progress=False)
    fetch(source, tmp_path, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["Toy"]
    assert _hidden(tmp_path) == []


_KILLED_FETCH = """
import os, signal, sys
import importlib
from gspdml.data.fetch import Archive, DatasetSource, fetch
sys.path.insert(0, {tests!r})
from tests.data.test_data_fetch import count_check
module, point = importlib.import_module({module!r}), {point!r}
real = getattr(module, point)
def die(*args, **kwargs):
    if point == "swap_folder":
        real(*args, **kwargs)  # the new folder is in place, the old one not yet cleaned
    os.kill(os.getpid(), signal.SIGKILL)
setattr(module, point, die)
archive = Archive("toy.tgz", md5={md5!r})
fetch(DatasetSource("toy", (archive,), count_check(40)), {root!r}, progress=False)
"""


@pytest.mark.parametrize(
    "module, point",
    [
        ("gspdml.data.dataset_refresh", "swap_folder"),  # after the exchange, before the merge
        pytest.param("gspdml.data.fetch", "install", marks=pytest.mark.slow),  # before it
    ],
)
def test_a_kill_during_a_refetch_leaves_a_dataset_and_the_next_fetch_cleans_up(
    tmp_path, module, point
):
    root = tmp_path / "root"
    root.mkdir()
    (root / "toy.tgz").write_bytes(ARCHIVE)  # placed by the user: no server in the child
    archive = Archive("toy.tgz", md5=hashlib.md5(ARCHIVE).hexdigest())
    source = DatasetSource("toy", (archive,), count_check(40))
    fetch(source, root, progress=False)
    (root / "Toy" / "my-notes.txt").write_text("keep me\n")
    tests = str(Path(__file__).resolve().parents[2])
    code = _KILLED_FETCH.format(
        module=module, point=point, tests=tests, md5=archive.md5, root=str(root)
    )
    done = run_python(code)
    assert done.returncode == -signal.SIGKILL, done.stderr
    images = sorted(p.name for p in (root / "Toy" / "images").iterdir())
    assert len(images) == 40  # a complete dataset where the readers look, old or new
    assert fetch(source, root, progress=False) == 40  # the next fetch finishes the clean-up
    assert (root / "Toy" / "my-notes.txt").read_text() == "keep me\n"
    assert _hidden(root) == []
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == [
        "Toy",
        "toy.tgz",
    ]

"""One writer per run folder: a second ``gspdml train`` into a folder that a running training
holds fails at once naming the holder, and the first run's files stay its own (the first a real
process, the second ``gspdml train`` called in the test's process). Before, the second run
interleaved its lines into metrics.jsonl and replaced config.yaml while the weights and results
came from the first."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gspdml.cli import main
from gspdml.training import run_lock
from gspdml.training.run_lock import (
    LOCK_FILE,
    FolderLock,
    FolderLocked,
    LockFileRefused,
    check_unlocked,
)

REPO = Path(__file__).resolve().parents[2]
RUN_LOCK_SOURCE = Path(run_lock.__file__)


def _gspdml(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "gspdml", *map(str, args)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _training(run_dir: Path) -> bool:
    """The run holds its lock and has logged a step (its config.yaml is written)."""
    lock, log = run_dir / LOCK_FILE, run_dir / "metrics.jsonl"
    return (
        lock.is_file()
        and lock.read_text().strip() != ""
        and log.is_file()
        and log.stat().st_size > 0
    )


@pytest.mark.slow
def test_a_second_training_into_a_held_folder_fails_naming_the_first(make_config, tmp_path, capsys):
    first_config = tmp_path / "first.yaml"
    first_config.write_text(
        yaml.safe_dump(make_config(schedule={"max_steps": 400}, evaluation={"every": 400}))
    )
    second_config = tmp_path / "second.yaml"
    second_config.write_text(yaml.safe_dump(make_config(model={"embedding_dim": 8})))
    run_dir = tmp_path / "run"
    first = _gspdml("train", first_config, "--run-dir", run_dir, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not _training(run_dir) and first.poll() is None:
            assert time.monotonic() < deadline, (
                "the first training never took its lock and logged a step"
            )
            time.sleep(0.2)
        assert first.poll() is None, first.communicate()
        # the second training runs in the test's process: the lock is the first process's
        assert main(["train", str(second_config), "--run-dir", str(run_dir)]) == 2
        err = capsys.readouterr().err
        assert f"{run_dir} is being written by pid {first.pid}" in err
        assert "gspdml train" in err
    finally:
        first.send_signal(signal.SIGINT)  # Ctrl-C: stops at a step boundary, checkpoint written
        first.communicate(timeout=120)
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["model"]["embedding_dim"] == 16  # the first run's config, not the second's
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    steps = [json.loads(line)["step"] for line in lines]
    assert steps == sorted(steps) and len(steps) == len(set(steps))  # one writer's lines


def test_the_lock_is_exclusive_names_its_holder_and_is_released(tmp_path):
    held = FolderLock(tmp_path / "run", "gspdml index")
    with pytest.raises(FolderLocked, match=r"being written by pid \d+ on .*\(gspdml index: "):
        FolderLock(tmp_path / "run", "gspdml train")
    with pytest.raises(FolderLocked):
        check_unlocked(tmp_path / "run")
    held.release()
    held.release()  # idempotent
    check_unlocked(tmp_path / "run")
    FolderLock(tmp_path / "run", "gspdml train").release()


def test_a_lock_file_left_by_a_killed_process_is_taken_over(tmp_path):
    """flock dies with its process: a SIGKILLed holder leaves a file, not a lock. The holder loads
    run_lock.py by its path, without the ``gspdml.training`` package (and torch) around it."""
    folder = tmp_path / "run"
    code = (
        "import importlib.util, time; "
        f"spec = importlib.util.spec_from_file_location('run_lock', {str(RUN_LOCK_SOURCE)!r}); "
        "run_lock = importlib.util.module_from_spec(spec); spec.loader.exec_module(run_lock); "
        f"run_lock.FolderLock({str(folder)!r}, 'holder'); print('held', flush=True); time.sleep(60)"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    holder = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(FolderLocked):
        FolderLock(folder, "second")
    holder.kill()
    holder.wait()
    assert (folder / LOCK_FILE).read_text()  # the dead holder's record is still there
    FolderLock(folder, "second").release()


# issue 39, defects 1 and 16: the lock file is gspdml's own; a link or a folder in its place is
# refused, and nothing outside the folder is opened, emptied or created.


def test_a_lock_file_that_is_a_link_never_empties_the_file_it_points_at(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's notes\n")
    folder = tmp_path / "received-run"
    folder.mkdir()
    (folder / LOCK_FILE).symlink_to(victim)
    with pytest.raises(LockFileRefused, match=r"\.gspdml\.lock is a symbolic link.*remove it"):
        FolderLock(folder, "gspdml train")
    with pytest.raises(LockFileRefused, match="symbolic link"):
        check_unlocked(folder)  # the early check before the minutes of work refuses it too
    assert victim.read_text() == "the user's notes\n"


def test_a_dangling_lock_link_creates_nothing_outside_the_folder(tmp_path):
    target = tmp_path / "outside" / "created.txt"
    target.parent.mkdir()
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_FILE).symlink_to(target)
    with pytest.raises(LockFileRefused, match="symbolic link"):
        check_unlocked(folder)
    with pytest.raises(LockFileRefused, match="symbolic link"):
        FolderLock(folder, "gspdml index")
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_a_lock_file_hard_linked_to_another_file_is_not_emptied(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("kept\n")
    folder = tmp_path / "run"
    folder.mkdir()
    os.link(victim, folder / LOCK_FILE)
    with pytest.raises(LockFileRefused, match="2 names"):
        FolderLock(folder, "gspdml train")
    assert victim.read_text() == "kept\n"


def test_a_lock_path_that_is_a_folder_is_a_clear_error(tmp_path, capsys):
    from tests.helpers.retrieval import write_image_folder, write_run

    write_run(tmp_path / "run")
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=2)
    (tmp_path / "idx" / LOCK_FILE).mkdir(parents=True)
    status = main(
        ["index", str(tmp_path / "run"), str(tmp_path / "images")]
        + ["--out", str(tmp_path / "idx")]
    )
    err = capsys.readouterr().err
    assert status == 2
    assert f"gspdml: error: {tmp_path / 'idx' / LOCK_FILE} is a folder" in err, err
    assert "remove it" in err

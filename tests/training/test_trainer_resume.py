"""A run killed mid-training and resumed ends with the same weights as an uninterrupted run.

The killed run and its resume are real ``gspdml train`` processes (SIGKILL needs one); the
uninterrupted run they are compared with trains in the test's process, and the processes are
given its thread count, so that all three compute alike."""

import json
import os
import signal
import subprocess
import sys
import time

import torch
from safetensors.torch import load_file

from gspdml.config import dump_config, load_config
from gspdml.training import train


def _start(config_path, run_dir, *extra):
    cmd = [
        sys.executable,
        "-m",
        "gspdml",
        "train",
        str(config_path),
        "--run-dir",
        str(run_dir),
        "--no-progress",
        *extra,
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "OMP_NUM_THREADS": str(torch.get_num_threads()),
    }
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _weights(run_dir):
    return load_file(str(run_dir / "model.safetensors"))


def test_sigkill_then_resume_gives_identical_weights_and_log(tmp_path, make_config):
    config = make_config(schedule={"max_steps": 24}, evaluation={"every": 6, "patience": None})
    path = tmp_path / "run.yaml"
    path.write_text(dump_config(load_config(config)))

    straight = tmp_path / "straight"
    train(load_config(path), straight)

    killed = tmp_path / "killed"
    proc = _start(path, killed)
    checkpoint = killed / "checkpoints" / "last.safetensors"
    deadline = time.time() + 300
    while not checkpoint.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.005)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "model.safetensors").exists()

    proc = _start(path, killed, "--resume")
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()

    a, b = _weights(straight), _weights(killed)
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    log_a = (straight / "metrics.jsonl").read_text().splitlines()
    log_b = (killed / "metrics.jsonl").read_text().splitlines()
    assert log_a == log_b
    assert json.loads((straight / "results.json").read_text()) == json.loads(
        (killed / "results.json").read_text()
    )


def test_resume_refuses_a_missing_run_and_train_refuses_to_overwrite(tmp_path, make_config):
    from gspdml.errors import ConfigError

    config = load_config(make_config(schedule={"max_steps": 5}))
    run_dir = tmp_path / "r"
    try:
        train(config, run_dir, resume=True)
    except ConfigError as err:
        assert "nothing to resume" in str(err)
    else:
        raise AssertionError("resume of a missing run must fail")
    train(config, run_dir)
    try:
        train(config, run_dir)
    except ConfigError as err:
        assert "already holds a run" in str(err)
    else:
        raise AssertionError("a second train into the same run dir must fail")


def test_resuming_a_finished_run_rewrites_its_final_test_record_once(tmp_path, make_config):
    config = load_config(
        make_config(schedule={"max_steps": 4}, evaluation={"every": 2, "patience": None})
    )
    run_dir = tmp_path / "r"
    first = train(config, run_dir)
    log_before = (run_dir / "metrics.jsonl").read_text()
    (
        run_dir / "results.json"
    ).unlink()  # e.g. the protocol runner resumes a run whose results are gone
    again = train(config, run_dir, resume=True)
    assert again["test"] == first["test"]
    assert (run_dir / "metrics.jsonl").read_text() == log_before
    assert sum(1 for line in log_before.splitlines() if json.loads(line).get("final")) == 1

"""``scripts/rehearse.py`` end to end at a tiny scale: the row's dataset written in its official
layout, the row's preset trained through ``Trainer`` for two steps with one validation round,
and every phase timed and printed beside the GPU-hour estimate. The full-size run is the same
path with ``--scale 1`` and the preset's own images (docs/benchmarks.md)."""

import json
import re
from pathlib import Path

from gspdml.training import trainer as trainer_module
from gspdml.training import validation
from tests.helpers.repo_scripts import load_script

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def test_a_tiny_rehearsal_times_every_phase_and_leaves_the_trainer_as_it_was(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # rehearse.py imports rehearsal_data beside it
    small = [
        "data.dataset.resize=72",
        "data.dataset.crop=64",
        "data.dataset.num_folds=2",  # the 4 training classes of this scale: 2 train, 2 validate
        "data.classes_per_batch=2",
        "data.samples_per_class=2",
        "data.eval_batch_size=16",
        "model.pooling.num_prototypes=4",
    ]
    argv = ["gsp-table1", "--rows", "cub/C2+GSP", "--steps", "2", "--scale", "0.04"]
    argv += ["--root", str(tmp_path / "data"), "--out", str(tmp_path / "runs"), "--workers", "1"]
    rehearse = load_script("scripts/rehearse.py")
    assert rehearse.main([*argv, "--device", "cpu", "--set", *small]) == 0
    printed = capsys.readouterr().out
    images = rehearse.total_images(rehearse.layout("cub"), 0.04)
    seconds = dict(re.findall(r"^\| (.+?) \| ([0-9.]+) \|$", printed, re.MULTILINE))
    assert set(seconds) == {
        f"dataset written ({images} images, or reused)",
        "data read + model built",
        "baseline",
        "training: data wait",
        "training: forward/backward/update",
        "validation",
        "test + save",
    }
    assert float(seconds["validation"]) > 0 and float(seconds["test + save"]) > 0
    assert "on cpu, 2 steps of 4 images" in printed
    assert re.search(r"estimate \(gspdml reproduce --dry-run\): [0-9.]+ GPU-hours", printed)
    assert re.search(r"measured rates on cpu: [0-9.]+ hours for the same", printed)
    test = json.loads(printed.strip().splitlines()[-1])["test"]
    assert 0.0 <= test <= 1.0
    (run,) = (tmp_path / "runs").iterdir()
    assert (run / "results.json").is_file()
    # the phases were timed by wrapping the trainer module's functions: put back afterwards
    assert trainer_module.validation_round is validation.validation_round
    assert trainer_module.final_results is validation.final_results

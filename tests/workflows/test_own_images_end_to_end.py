"""A user's own image folder with the usual faults, through the whole CLI path: train, resume,
evaluate, index, search, report and export, asserting each outcome (issue: "your own images,
with nothing silently wrong")."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from gspdml.cli import main
from gspdml.compat.hardware import auto_precision
from tests.helpers.retrieval import index_file

SRC = Path(__file__).resolve().parents[2] / "src"
HOSTILE = ["sp ace.png", "ünï cödé.png", "<b>&'quote\".png", "-dash.png", "semi;colon.png"]
TRAIN = [
    "schedule.max_steps=6",
    "evaluation.every=3",
    "trainer.checkpoint_every=2",
    "data.classes_per_batch=2",
    "data.dataset.resize=24",
    "data.dataset.crop=24",
]


def _picture(path: Path, colour, rng) -> None:
    pixels = np.clip(np.asarray(colour) + rng.normal(0, 20, (20, 20, 3)), 0, 255).astype(np.uint8)
    Image.fromarray(pixels).save(path, format="PNG")


def faulty_folder(root: Path) -> dict[str, Path]:
    """8 classes (5 images each, hostile file names in one, a class named with HTML characters),
    a last class of a single image, a corrupt file, hidden and system folders with images."""
    rng = np.random.default_rng(0)
    classes = ["a&b <c>", "blue", "cyan", "green", "grey", "red", "white", "yellow"]
    for k, name in enumerate(classes):
        (root / name).mkdir(parents=True)
        names = HOSTILE if name == "red" else [f"{i}.png" for i in range(5)]
        for file in names:
            _picture(root / name / file, rng.integers(0, 255, 3) * 0 + 30 * k, rng)
    (root / "zz-single").mkdir()
    _picture(root / "zz-single" / "only.png", (250, 10, 250), rng)
    corrupt = root / "green" / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + b"not really a png")
    hidden = {
        "notebook": root / ".ipynb_checkpoints",
        "mac": root / "__MACOSX",
        "inner": root / "blue" / ".thumbs",
    }
    for folder in hidden.values():
        folder.mkdir()
        _picture(folder / "0.png", (0, 0, 0), rng)
    return {"corrupt": corrupt, **hidden}


def gspdml(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_own_folder_through_the_whole_cli(tmp_path, monkeypatch, capsys):
    old_umask = os.umask(0o027)
    try:
        _whole_path(tmp_path, monkeypatch, capsys)
    finally:
        os.umask(old_umask)


def _whole_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    faults = faulty_folder(tmp_path / "images")
    run = tmp_path / "runs" / "own-images"

    # train: the split, what was skipped and why, device and precision, one line per evaluation
    code, out, err = gspdml(
        capsys, "train", "own-images", "data.dataset.root=images", *TRAIN, "--no-progress"
    )
    assert code == 0, err
    for hidden in ("notebook", "mac", "inner"):
        assert str(faults[hidden]) in err
    assert f"{faults['corrupt']}" in err and "unusable" in err
    first = next(
        line for line in err.splitlines() if line.startswith("gspdml: run ")
    )  # the run's first line
    assert (
        f"run {run} at step 0 on cpu, precision {auto_precision('cpu').precision} (auto: " in first
    )
    # 9 classes: 4 test classes (the last, with the single image), 5 training classes of which at
    # least 2 validate (round(0.25 * 5) = 1 could not rank); the corrupt file left out of val
    assert (
        "train: 3 classes, 15 images" in err
        and "val: 2 classes, 10 images" in err
        and "test: 4 classes, 16 images" in err
    )
    assert "pooling: initialised at step 3" in err
    assert [line.split(":")[1].strip() for line in err.splitlines() if "val map_at_r" in line] == [
        "step 3/6",
        "step 6/6",
    ]
    results = json.loads(out)
    assert results["test"]["num_lone_queries"] == 1 and isinstance(
        results["test"]["num_queries"], int
    )
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["data"]["dataset"]["root"] == str(tmp_path / "images")  # resolved
    for file in (
        run / "config.yaml",
        run / "model.safetensors",
        run / "checkpoints" / "last.safetensors",
    ):
        assert stat.S_IMODE(file.stat().st_mode) == 0o640  # 0666 less the umask 027

    # resume: a config that changes the weights is refused, naming the key; a harmless change needs the flag
    code, _, err = gspdml(
        capsys,
        "train",
        "own-images",
        "data.dataset.root=images",
        *TRAIN,
        "data.dataset.crop=20",
        "--resume",
    )
    assert code == 2 and "data.dataset.crop: 24 -> 20" in err
    code, _, err = gspdml(
        capsys,
        "train",
        "own-images",
        "data.dataset.root=images",
        *TRAIN,
        "trainer.log_every=1",
        "--resume",
    )
    assert code == 2 and "--allow-changes" in err
    code, _, err = gspdml(
        capsys,
        "train",
        "own-images",
        "data.dataset.root=images",
        *TRAIN,
        "trainer.log_every=1",
        "--resume",
        "--allow-changes",
    )
    assert code == 0 and "changed on resume: trainer.log_every: 10 -> 1" in err
    assert yaml.safe_load((run / "config.yaml").read_text())["trainer"]["log_every"] == 1

    # evaluate from another directory (the root is stored resolved), with progress lines (every
    # update: the phase is shorter than the default interval)
    monkeypatch.chdir(tmp_path / "runs")
    monkeypatch.setenv("GSPDML_PROGRESS_SECONDS", "0")
    code, out, err = gspdml(capsys, "evaluate", run)
    assert code == 0 and json.loads(out)["map_at_r"] == pytest.approx(
        results["test"]["map_at_r"], abs=1e-6
    )
    assert "embedding" in err

    # index: the corrupt file is named and skipped, hidden folders are named, labels are the classes
    index = tmp_path / "images.index"
    # (a failure after the first chunk of 2 x 8 images keeps that chunk; --append adds the rest)
    code, out, err = gspdml(
        capsys, "index", run, tmp_path / "images", "--out", index, "--batch-size", "2"
    )
    assert (
        code == 2
        and str(faults["corrupt"]) in err
        and "16 images embedded before it are saved" in err
    )
    assert len(json.loads(index_file(index, "index.json").read_text())["paths"]) == 16
    code, out, err = gspdml(
        capsys,
        "index",
        run,
        tmp_path / "images",
        "--out",
        index,
        "--append",
        "--on-error",
        "skip",
        "--no-progress",
    )
    assert code == 0 and f"skipped {faults['corrupt']}" in err and str(faults["mac"]) in err
    assert out.startswith("added 25 images (16 already indexed, 0 dropped), 1 files skipped")
    meta = json.loads(index_file(index, "index.json").read_text())
    assert len(meta["paths"]) == 8 * 5 + 1
    assert {
        Path(p).name for p, label in zip(meta["paths"], meta["labels"]) if label == "red"
    } == set(HOSTILE)
    assert stat.S_IMODE(index_file(index, "vectors.safetensors").stat().st_mode) == 0o640

    # search: JSON into a closed pipe ends quietly (a real subprocess and a real pipe)
    query = tmp_path / "images" / "red" / "sp ace.png"
    piped = subprocess.run(
        f"{sys.executable} -m gspdml search {index} '{query}' --json -k 40 | head -n 2",
        shell=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
    )
    assert (
        piped.stdout.count("\n") == 2
        and "Traceback" not in piped.stderr
        and "BrokenPipe" not in piped.stderr
    )
    code, out, _ = gspdml(capsys, "search", index, query, "-k", "1", "--json")
    assert code == 0 and json.loads(out)[0]["results"][0]["path"] == str(query)

    # report: hostile names escaped, the skipped file listed
    code, out, err = gspdml(
        capsys,
        "report",
        run,
        "--images",
        tmp_path / "images",
        "--on-error",
        "skip",
        "--no-progress",
    )
    page = (run / "report.html").read_text(encoding="utf-8")
    assert (
        code == 0
        and "Skipped files" in page
        and "a&amp;b &lt;c&gt;" in page
        and "<b>&'" not in page
    )

    # export, checked against PyTorch
    code, out, err = gspdml(capsys, "export", run, "--format", "onnx")
    assert code == 0 and (run / "export" / "embedder.onnx").is_file()

    # impossible outputs fail before the work
    (tmp_path / "a-file").write_text("x")
    for argv in (
        ["index", run, tmp_path / "images", "--out", tmp_path / "a-file" / "idx"],
        ["report", run, "--out", tmp_path / "a-file" / "r.html"],
        ["export", run, "--format", "onnx", "--out", tmp_path / "a-file" / "m.onnx"],
        ["search", index, query, "--save", tmp_path / "a-file" / "r.safetensors"],
    ):
        code, out, err = gspdml(capsys, *argv)
        assert code == 2 and "cannot write" in err and "a-file" in err, argv

    # a vanished file leaves the index on --append; a moved run is found through --run
    (tmp_path / "images" / "blue" / "0.png").unlink()
    code, out, err = gspdml(
        capsys, "index", run, tmp_path / "images", "--out", index, "--append", "--on-error", "skip"
    )
    assert code == 0 and "dropped" in err and "blue/0.png" in err and "1 dropped" in out
    moved = tmp_path / "moved-run"
    shutil.move(run, moved)
    code, out, err = gspdml(capsys, "search", index, query)
    assert code == 2 and "--run" in err and "is gone" in err
    code, out, err = gspdml(capsys, "search", index, query, "--run", moved, "-k", "1")
    assert code == 0 and "sp ace.png" in out

"""Presets by name from an installed wheel, not only from a checkout: the wheel is built from
this source tree, installed into a scratch folder, and used from another directory."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(args, cwd, site):
    env = {**os.environ, "PYTHONPATH": str(site), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_presets_load_by_name_from_an_installed_wheel(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "wheel"),
            str(tree),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "wheel").glob("gspdml-*.whl")
    site = tmp_path / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-compile", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    # one interpreter from elsewhere: the package's location, two presets by name, and the
    # listing and the printed config of the ``gspdml config`` command as the CLI prints them
    probe = _run(["-c", PROBE], elsewhere, site)
    assert probe.returncode == 0, probe.stderr
    location, pooling, own, listed, shown = json.loads(probe.stdout)
    assert Path(location).is_relative_to(site) and (pooling, own) == ("gsp", "own-images")
    assert {"demo-gsp", "demo-gap", "own-images", "cub-fair-c2-gsp"} <= set(listed.split())
    # demo-gsp: a preset with a base include
    assert "name: gsp" in shown and "output_dir: runs/demo" in shown


#: what the probe interpreter runs: ``gspdml config --list`` and ``gspdml config demo-gsp`` by
#: the CLI's ``main``, their output captured, each with its exit status checked
PROBE = """
import contextlib, io, json
import gspdml, gspdml.config as c
from gspdml.cli import main

def printed(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(list(argv)) == 0, argv
    return out.getvalue()

print(json.dumps([
    gspdml.__file__,
    c.load_config("demo-gsp")["model"]["pooling"]["name"],
    c.load_config("own-images")["name"],
    printed("config", "--list"),
    printed("config", "demo-gsp"),
]))
"""

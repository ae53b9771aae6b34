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
        [*pip, "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    probe = _run(
        [
            "-c",
            "import json, gspdml, gspdml.config as c; print(json.dumps([gspdml.__file__, "
            "c.load_config('demo-gsp')['model']['pooling']['name'], c.load_config('own-images')['name']]))",
        ],
        elsewhere,
        site,
    )
    assert probe.returncode == 0, probe.stderr
    location, pooling, own = json.loads(probe.stdout)
    assert Path(location).is_relative_to(site) and (pooling, own) == ("gsp", "own-images")
    listed = _run(["-m", "gspdml", "config", "--list"], elsewhere, site)
    assert {"demo-gsp", "demo-gap", "own-images", "cub-fair-c2-gsp"} <= set(listed.stdout.split())
    shown = _run(
        ["-m", "gspdml", "config", "demo-gsp"], elsewhere, site
    )  # a preset with a base include
    assert (
        shown.returncode == 0
        and "name: gsp" in shown.stdout
        and "output_dir: runs/demo" in shown.stdout
    )

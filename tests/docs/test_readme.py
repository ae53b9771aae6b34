"""The README's code runs as written, from a scratch directory: the Python quick start (presets
by name), and the "Train on your own images" section (its folder and CSV configs train through
the real CLI, and its Python block embeds and searches with the trained run)."""

import re
from pathlib import Path

import numpy as np
import yaml
from PIL import Image

from gspdml.cli import main

ROOT = Path(__file__).resolve().parents[2]


#: the quick start's schedule, and the shorter run the test trains: every call runs as written
#: (two validation rounds, the test split, the saved weights), but 4 steps on 8 collages per class
#: instead of 100 steps on 40: more would only make the same checks slower
README_SCHEDULE = '"schedule.max_steps=100", "evaluation.every=50"'
TEST_SCHEDULE = '"schedule.max_steps=4", "evaluation.every=2", "data.dataset.images_per_class=8"'


def test_python_quick_start_runs(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python quick start", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert code.count(README_SCHEDULE) == 1, "the quick start's schedule changed: update the test"
    code = code.replace(README_SCHEDULE, TEST_SCHEDULE)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    assert (tmp_path / "runs" / "scratch" / "gsp" / "model.safetensors").exists()
    assert 0.0 < namespace["results"]["test"]["map_at_r"] <= 1.0
    assert namespace["out"].weights.shape == (4, 8, 8) and namespace["rho"].shape == (2, 49)


FAST = ["schedule.max_steps=6", "evaluation.every=3", "--no-progress"]


def _section() -> str:
    readme = (ROOT / "README.md").read_text()
    return readme.split("## Train on your own images", 1)[1].split("\n## ", 1)[0]


def _write_images(root: Path, classes: int = 8, per_class: int = 5) -> list[tuple[str, str]]:
    """Coloured squares, one colour per class (``images/<class>/<i>.png``)."""
    rng = np.random.default_rng(0)
    rows = []
    names = ["red", "blue"] + [f"c{i}" for i in range(2, classes)]
    for name in names:
        (root / name).mkdir(parents=True)
        colour = rng.integers(0, 255, 3)
        for i in range(per_class):
            pixels = np.clip(colour + rng.normal(0, 20, (24, 24, 3)), 0, 255).astype(np.uint8)
            Image.fromarray(pixels).save(root / name / f"{i}.png")
            rows.append((f"{name}/{i}.png", name))
    return rows


def test_own_images_section_runs(tmp_path, monkeypatch):
    section = _section()
    folder_config, csv_config = re.findall(r"```yaml\n(.*?)```", section, re.S)
    python = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    rows = _write_images(tmp_path / "images")
    (tmp_path / "images" / "images.csv").write_text(
        "path,label\n" + "".join(f"{p},{label}\n" for p, label in rows)
    )
    Path("own-folder.yaml").write_text(folder_config)
    Path("own-csv.yaml").write_text(
        csv_config.replace("path: images.csv", "path: images/images.csv")
    )

    assert main(["train", "own-folder.yaml", *FAST]) == 0
    assert main(["train", "own-csv.yaml", *FAST]) == 0
    for run, option in (("my-folder", "root"), ("my-csv", "path")):
        saved = yaml.safe_load((tmp_path / "runs" / run / "config.yaml").read_text())["data"][
            "dataset"
        ]
        assert Path(saved[option]).is_absolute() and Path(saved[option]).exists()
        assert {"val_fraction", "transform", "normalization", "check"} <= set(
            saved
        )  # defaults filled in

    namespace: dict = {}
    exec(compile(python, "README.md", "exec"), namespace)
    results, index = namespace["results"], namespace["index"]
    assert len(index) == len(rows) and namespace["queries"].shape == (2, index.dim)
    # each query is itself in the index: its nearest neighbour is itself, at distance 0
    top = [row["results"][0] for row in results.rows()]
    assert [Path(r["path"]).relative_to(tmp_path).as_posix() for r in top] == [
        "images/red/0.png",
        "images/blue/1.png",
    ]
    assert all(abs(r["distance"]) < 1e-3 for r in top)

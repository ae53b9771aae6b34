"""``--resume`` after the data changed (a class renamed, images added) is refused naming what
changed, unless ``--allow-data-change``; the same data resumes as before. Before, the run went on
without a word on other data."""

import json
import shutil

import pytest
from PIL import Image

from gspdml.config import load_config
from gspdml.errors import ConfigError
from gspdml.training import train
from gspdml.training.data_fingerprint import differences, fingerprint
from tests.helpers.images import folder_config, image_folder


def _run(tmp_path):
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    config = load_config(folder_config(root, tmp_path / "runs"))
    run_dir = tmp_path / "runs" / "robust"
    train(config, run_dir)
    return root, config, run_dir


def test_resume_on_changed_data_is_refused_naming_the_change(tmp_path):
    root, config, run_dir = _run(tmp_path)
    assert json.loads((run_dir / "data.json").read_text())["train"]["class_names"] == ["a", "b"]
    train(config, run_dir, resume=True)  # the same data: resumes

    shutil.move(root / "train" / "b", root / "train" / "bb")  # a class renamed
    for i in range(3):  # and images added
        Image.new("RGB", (20, 20), (9 * i, 0, 0)).save(root / "train" / "a" / f"new{i}.png")
    with pytest.raises(ConfigError) as err:
        train(config, run_dir, resume=True)
    message = str(err.value)
    assert "the data changed since" in message and "--allow-data-change" in message
    assert "train: classes removed b; added bb" in message
    assert "train: 3 files added (8 -> 11)" in message
    train(config, run_dir, resume=True, allow_data_change=True)


def test_the_fingerprint_sees_a_rewritten_file(tmp_path):
    root, config, run_dir = _run(tmp_path)
    before = json.loads((run_dir / "data.json").read_text())
    image = next((root / "test" / "c").iterdir())
    Image.new("RGB", (40, 40)).save(image)  # same name, another size on disk
    from gspdml.data import build_data

    now = fingerprint(build_data(config.data.dataset, seed=config.seed))
    assert differences(before, now) == ["test.query: files changed (6 -> 6)"]

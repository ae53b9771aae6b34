"""``--resume`` after the data changed (a class renamed, images added) is refused naming what
changed, unless ``--allow-data-change``; the same data resumes as before. Before, the run went on
without a word on other data."""

import json
import os
import shutil

import numpy as np
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


def test_resume_refuses_an_image_rewritten_with_the_same_name_size_and_time(tmp_path):
    """Only names and sizes were hashed: an image rewritten in place with the same size was
    accepted by ``--resume`` (issue 39 #7). The fingerprint hashes every file's content."""
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    image = root / "train" / "a" / "img00.png"

    def rewrite(seed):  # stored PNG (no compression): the size depends on the pixel count only
        pixels = np.random.default_rng(seed).integers(0, 256, (20, 20, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(image, compress_level=0)

    rewrite(1)
    config = load_config(folder_config(root, tmp_path / "runs"))
    run_dir = tmp_path / "runs" / "robust"
    train(config, run_dir)
    before, status = image.read_bytes(), image.stat()
    rewrite(2)
    os.utime(image, ns=(status.st_atime_ns, status.st_mtime_ns))  # the time set back as well
    assert image.stat().st_size == status.st_size and image.read_bytes() != before
    assert image.stat().st_mtime_ns == status.st_mtime_ns
    with pytest.raises(ConfigError) as err:
        train(config, run_dir, resume=True)
    assert "train: the content of files changed (same 8 names and sizes" in str(err.value)
    train(config, run_dir, resume=True, allow_data_change=True)


def test_a_data_record_without_content_is_compared_by_names_and_sizes(tmp_path):
    """A run started before the content digest was recorded resumes on the same files."""
    root, config, run_dir = _run(tmp_path)
    record = json.loads((run_dir / "data.json").read_text())
    assert all("content" in split for split in record.values())
    older = {
        name: {k: v for k, v in split.items() if k != "content"} for name, split in record.items()
    }
    (run_dir / "data.json").write_text(json.dumps(older))
    train(config, run_dir, resume=True)


def test_allow_data_change_after_a_class_was_added_names_the_proxies(tmp_path):
    """A proxy loss holds one proxy per training class: resuming with --allow-data-change after
    a class was added failed with torch's raw size mismatch for ``proxies`` (issue 39 #14). It is
    a ConfigError naming the tensor, both shapes and the fix."""
    root = image_folder(tmp_path / "images", train={"a": 4, "b": 4}, test={"c": 3, "d": 3})
    raw = folder_config(root, tmp_path / "runs")
    config = load_config({**raw, "loss": {"name": "proxy_anchor"}})
    run_dir = tmp_path / "runs" / "robust"
    train(config, run_dir)
    for i in range(4):
        Image.new("RGB", (20, 20), (0, 30 * i, 0)).save(root / "train" / f"new{i}.png")
    (root / "train" / "e").mkdir()
    for i in range(4):
        (root / "train" / f"new{i}.png").rename(root / "train" / "e" / f"new{i}.png")
    with pytest.raises(ConfigError) as err:
        train(config, run_dir, resume=True, allow_data_change=True)
    message = str(err.value)
    assert message.startswith("--allow-data-change: ")
    assert "loss.proxies: (2, 8) in the checkpoint, (3, 8) now" in message
    assert "one row per training class" in message and "start a new run" in message
    assert "the data now has 3 training classes" in message

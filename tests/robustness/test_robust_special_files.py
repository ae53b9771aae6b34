"""Decoding is honest (hardening items 11, 15, 16): every command reads the same files by the
same rules.

* A float image with a NaN or infinite pixel is refused naming the file (it decoded as an
  all-black image before, silently).
* A named pipe called ``x.png`` is never opened: listing skips it and loading refuses it (before,
  ``gspdml index --on-error skip`` blocked forever on it).
* A symbolic link to a class folder is followed by the index as by the training reader (before,
  training read the linked folder's images and ``index``/``report`` said "no image files"); a
  link cycle is entered once.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gspdml.data.folder import read_image_folder
from gspdml.data.images import check_image, list_images, load_image
from gspdml.errors import DataError
from gspdml.retrieval.index import RetrievalIndex
from gspdml.retrieval.sources import list_image_folder
from tests.helpers.retrieval import write_image_folder, write_run


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_float_image_with_a_non_finite_pixel_is_refused_naming_the_file(tmp_path, bad):
    pixels = np.full((6, 5), 0.5, dtype=np.float32)
    pixels[2, 3] = bad
    path = tmp_path / "depth.tif"
    Image.fromarray(pixels, mode="F").save(path)
    with pytest.raises(DataError, match=r"depth\.tif: cannot decode image .*1 of 30 pixels"):
        load_image(path)
    pixels[2, 3] = 0.25  # the same file, finite: decodes to its grey levels
    Image.fromarray(pixels, mode="F").save(path)
    grey = np.asarray(load_image(path))[..., 0]
    assert grey[2, 3] == round(0.25 * 255) and grey[0, 0] == round(0.5 * 255)


def _pipe(path: Path) -> Path:
    os.mkfifo(path)
    return path


def test_a_named_pipe_is_listed_as_skipped_and_never_opened(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=2)
    pipe = _pipe(tmp_path / "images" / "red" / "x.png")
    images, skipped = list_images(tmp_path / "images")
    assert pipe not in images and pipe in skipped and len(images) == 4
    with pytest.raises(DataError, match=r"x\.png: not a regular file"):
        load_image(pipe)  # returns at once (opening a FIFO for reading would block)
    assert "not a regular file" in check_image(pipe)


def test_index_on_error_skip_finishes_beside_a_named_pipe(tmp_path):
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=2)
    _pipe(tmp_path / "images" / "green" / "x.png")
    write_run(tmp_path / "run")
    command = [sys.executable, "-m", "gspdml", "index", str(tmp_path / "run")]
    command += [str(tmp_path / "images"), "--out", str(tmp_path / "idx"), "--on-error", "skip"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(RetrievalIndex.load(tmp_path / "idx")) == 4


def test_a_linked_class_folder_is_read_by_the_index_as_by_training(tmp_path):
    write_image_folder(tmp_path / "elsewhere", classes=("blue",), per_class=3)
    write_image_folder(tmp_path / "images", classes=("red", "green"), per_class=3)
    (tmp_path / "images" / "blue").symlink_to(tmp_path / "elsewhere" / "blue")
    (tmp_path / "images" / "red" / "loop").symlink_to(tmp_path / "images")  # a cycle

    paths, labels, skipped = list_image_folder(tmp_path / "images")
    assert sorted(set(labels)) == ["blue", "green", "red"] and len(paths) == 9
    assert str(tmp_path / "images" / "red" / "loop") in skipped  # entered once, not forever

    official = read_image_folder(str(tmp_path / "images"), test_fraction=0.34)
    splits = [official.train, official.test, official.val]
    trained = {os.path.realpath(p) for split in splits if split for p in split.paths}
    assert trained == {os.path.realpath(p) for p in paths}
    per_class = [len(split.paths) for split in splits if split]
    assert sum(per_class) == 9  # the loop inside red/ does not add green's files to red

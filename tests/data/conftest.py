"""Fixtures shared by the data tests: tiny image files written on the fly."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image


def _write_image(path, size=(10, 8), color=None, fmt=None, seed=0):
    """Write a small RGB image (random pixels unless ``color``) and return its path as str."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if color is None:
        pixels = np.random.default_rng(seed).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        image = Image.fromarray(pixels, "RGB")
    else:
        image = Image.new("RGB", size, color)
    image.save(path, format=fmt)
    return str(path)


@pytest.fixture
def write_image():
    return _write_image

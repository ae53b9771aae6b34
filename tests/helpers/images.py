"""Builders of small on-disk datasets with planted faults, and a tiny run config around them."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
from PIL import Image


def write_images(folder: Path, count: int, seed: int, size: int = 20) -> list[Path]:
    """``count`` random RGB PNGs in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        path = folder / f"img{i:02d}.png"
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def image_folder(root: Path, train: dict[str, int], test: dict[str, int]) -> Path:
    """``root/{train,test}/<class>/imgNN.png`` with the given number of images per class."""
    for split, classes in (("train", train), ("test", test)):
        for k, (name, count) in enumerate(sorted(classes.items())):
            write_images(root / split / name, count, seed=k + (100 if split == "test" else 0))
    return root


def png_header(path: Path, width: int, height: int) -> Path:
    """A PNG signature and IHDR chunk (8-bit RGB) claiming ``width x height`` pixels, without
    image data: what a decompression bomb looks like to a reader that parses the header."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))
    return path


def folder_config(root: Path, output_dir: Path, **dataset) -> dict:
    """A run on an image folder that trains in about a second (20 px images, 16 px crops)."""
    return {
        "name": "robust",
        "output_dir": str(output_dir),
        "seed": 1,
        "data": {
            "dataset": {
                "name": "image_folder",
                "root": str(root),
                "val_fraction": 0.0,
                "resize": 18,
                "crop": 16,
                "normalization": "none",
                **dataset,
            },
            "classes_per_batch": 2,
            "samples_per_class": 2,
        },
        "model": {"backbone": {"name": "small_cnn", "widths": [4, 8]}, "embedding_dim": 8},
        "loss": {"name": "c2", "neg_margin": 0.5},
        "schedule": {"max_steps": 2},
        "evaluation": {"every": 2, "split": "test", "patience": None, "recall_at": [1]},
        "trainer": {"progress": False, "log_every": 1},
    }

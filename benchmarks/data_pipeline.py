"""Images per second of one loader worker for each image recipe's training transform, beside a
plain PIL reference doing the same decode, resize, crop, flip and normalisation.

For each recipe of :data:`gspdml.data.recipes.RECIPES` (``mlrc``: the fair protocol's and the
thesis's; ``proxynca``; ``libc``; ``center``) and each image size (``cub``: 500 x 375, the
typical CUB photo; ``large``: 1200 x 900, of SOP's and Cars196's larger photos), ``--images``
JPEGs are written on the fly and read in one process:

* **gspdml**: :class:`gspdml.data.files.ImageFileDataset` items, as a training split reads them
  (the file checks, EXIF orientation, the recipe's seeded transform);
* **plain**: :func:`plain_item`: ``Image.open -> convert("RGB")``, the same sizes and crop scale
  with Python's ``random``, ``numpy`` to a normalised tensor: what a user's loader does.

A loader with ``W`` workers delivers about ``W`` times the per-worker rate while it has the
cores; ``--workers W`` also times a ``DataLoader`` with W workers over the gspdml dataset. The
GPU needs ``img/s of its step / img/s per worker`` workers (``data.num_workers: auto`` gives the
cores less one); the trainer's ``timing.jsonl`` says how long each step waited.

    PYTHONPATH=src python benchmarks/data_pipeline.py [--images 64] [--workers 2] [--recipes mlrc]
"""

from __future__ import annotations

import argparse
import math
import random
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from gspdml.data.files import ImageFileDataset
from gspdml.data.recipes import NORMALIZATIONS, RECIPES, image_transform

SIZES = {"cub": (500, 375), "large": (1200, 900)}


def write_images(folder: Path, count: int, size: tuple[int, int]) -> list[str]:
    """``count`` JPEGs (quality 90) of smooth colour fields with shapes at ``size``."""
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        low = rng.integers(0, 256, (size[1] // 16, size[0] // 16, 3), dtype=np.uint8)
        image = Image.fromarray(low).resize(size, Image.BICUBIC)
        path = folder / f"{size[0]}x{size[1]}-{i}.jpg"
        image.save(path, "JPEG", quality=90)
        paths.append(str(path))
    return paths


def plain_item(path: str, recipe: str, rng: random.Random) -> torch.Tensor:
    """The plain reference of a recipe's training transform."""
    resize, crop, scale, resize_first = RECIPES[recipe]
    image = Image.open(path).convert("RGB")
    if resize_first:
        w, h = image.size
        factor = resize / min(w, h)
        image = image.resize((round(w * factor), round(h * factor)), Image.BILINEAR)
    w, h = image.size
    if scale is None:  # center crop
        left, top, cw, ch = (w - crop) // 2, (h - crop) // 2, crop, crop
    else:
        area = w * h * rng.uniform(*scale)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw = min(w, round(math.sqrt(area * ratio)))
        ch = min(h, round(math.sqrt(area / ratio)))
        left, top = rng.randint(0, w - cw), rng.randint(0, h - ch)
    image = image.resize((crop, crop), Image.BILINEAR, box=(left, top, left + cw, top + ch))
    if scale is not None and rng.random() < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    norm = NORMALIZATIONS["imagenet"]
    x = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
    return (x - torch.tensor(norm["mean"])[:, None, None]) / torch.tensor(norm["std"])[
        :, None, None
    ]


def rate(read, count: int, repeats: int) -> float:
    """Images per second of ``read(i)`` over ``count`` items, best of ``repeats`` passes."""
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(count):
            read(i)
        best = min(best, time.perf_counter() - start)
    return count / best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--recipes", nargs="+", default=sorted(RECIPES))
    parser.add_argument("--sizes", nargs="+", default=sorted(SIZES), choices=sorted(SIZES))
    parser.add_argument("--workers", type=int, default=0, help="also time a DataLoader")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one worker: one core
    print(f"{args.images} JPEGs per size, best of {args.repeats} passes, one process")
    print(
        "| recipe / size | crop | gspdml img/s per worker | plain img/s per worker | gspdml/plain |"
    )
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            paths = write_images(Path(folder), args.images, SIZES[size])
            labels = np.zeros(len(paths), dtype=np.int64)
            for recipe in args.recipes:
                transform = image_transform(recipe, train=True)
                dataset = ImageFileDataset(paths, labels, transform, seed=0)
                rng = random.Random(0)
                ours = rate(lambda i: dataset[(i, 0)], len(paths), args.repeats)
                plain = rate(lambda i: plain_item(paths[i], recipe, rng), len(paths), args.repeats)
                print(
                    f"| {recipe} / {size} {SIZES[size][0]}x{SIZES[size][1]} | {RECIPES[recipe][1]} "
                    f"| {ours:.0f} | {plain:.0f} | {ours / plain:.0%} |",
                    flush=True,
                )
                if args.workers:
                    loader = torch.utils.data.DataLoader(
                        dataset,
                        sampler=[(i, 0) for i in range(len(paths))],
                        batch_size=16,
                        num_workers=args.workers,
                    )
                    start = time.perf_counter()
                    for _ in loader:
                        pass
                    seconds = time.perf_counter() - start
                    print(
                        f"|   DataLoader, {args.workers} workers | | {len(paths) / seconds:.0f} in all | | |"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

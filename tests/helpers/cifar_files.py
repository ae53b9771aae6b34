"""Tiny CIFAR-10 / CIFAR-100 folders in the official python layout (pickled dicts with bytes keys,
``b'data'`` uint8 ``[N, 3072]`` channel-major), for tests of the readers and of the collage.

Written with pickle protocol 2, as the official files (made by Python 2's cPickle) are.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

#: CIFAR-100's 20 super-classes as its meta file names them (5 sub-classes each)
COARSE_NAMES = [
    "aquatic_mammals", "fish", "flowers", "food_containers", "fruit_and_vegetables",
    "household_electrical_devices", "household_furniture", "insects", "large_carnivores",
    "large_man-made_outdoor_things", "large_natural_outdoor_scenes",
    "large_omnivores_and_herbivores", "medium_mammals", "non-insect_invertebrates", "people",
    "reptiles", "small_mammals", "trees", "vehicles_1", "vehicles_2",
]  # fmt: skip


def _dump(path: Path, payload: dict) -> None:
    with open(path, "wb") as file:
        pickle.dump(payload, file, protocol=2)


def _images(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    """Random uint8 rows whose first value is the label (so a test can find an image's class)."""
    data = rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8)
    data[:, 0] = labels
    return data


def write_cifar10(root: Path, per_class: int = 3, test_per_class: int = 2, seed: int = 0) -> Path:
    """``root/cifar-10-batches-py`` with 5 training batches and a test batch; returns ``root``."""
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    train = rng.permutation(np.repeat(np.arange(10), per_class * 5))
    for b, labels in enumerate(np.array_split(train, 5), start=1):
        _dump(
            folder / f"data_batch_{b}",
            {
                b"batch_label": f"training batch {b} of 5".encode(),
                b"labels": labels.tolist(),
                b"data": _images(rng, labels),
                b"filenames": [f"img_{b}_{i}.png".encode() for i in range(len(labels))],
            },
        )
    test = rng.permutation(np.repeat(np.arange(10), test_per_class))
    _dump(
        folder / "test_batch",
        {
            b"batch_label": b"testing batch 1 of 1",
            b"labels": test.tolist(),
            b"data": _images(rng, test),
            b"filenames": [f"test_{i}.png".encode() for i in range(len(test))],
        },
    )
    _dump(
        folder / "batches.meta",
        {
            b"label_names": [f"class{c}".encode() for c in range(10)],
            b"num_cases_per_batch": len(train) // 5,
            b"num_vis": 3072,
        },
    )
    return root


def fine_to_coarse(seed: int = 0) -> np.ndarray:
    """A random assignment of the 100 fine classes to the 20 super-classes, 5 each (the real
    files interleave them too)."""
    return np.random.default_rng(seed + 1).permutation(np.repeat(np.arange(20), 5))


def write_cifar100(root: Path, per_class: int = 3, test_per_class: int = 1, seed: int = 0) -> Path:
    """``root/cifar-100-python`` with train, test and meta; returns ``root``."""
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(seed)
    coarse = fine_to_coarse(seed)
    for part, count in (("train", per_class), ("test", test_per_class)):
        fine = rng.permutation(np.repeat(np.arange(100), count))
        _dump(
            folder / part,
            {
                b"filenames": [f"{part}_{i}.png".encode() for i in range(len(fine))],
                b"batch_label": f"{part}ing batch 1 of 1".encode(),
                b"fine_labels": fine.tolist(),
                b"coarse_labels": coarse[fine].tolist(),
                b"data": _images(rng, fine),
            },
        )
    _dump(
        folder / "meta",
        {
            b"fine_label_names": [f"fine{c:02d}".encode() for c in range(100)],
            b"coarse_label_names": [n.encode() for n in COARSE_NAMES],
        },
    )
    return root

"""The datasets of the classification protocol: CIFAR images reach the transform as the RGB
pictures the pickles hold, Flowers-102 trains on trnid + valid and tests on tstid, an ImageFolder
tree trains on the first fraction of each class and tests on all of val."""

import pickle

import numpy as np
import torch

from gspdml.data.classification import classification_splits
from tests.data.test_data_class_folders import make_tree
from tests.data.test_data_flowers102 import LABELS, PARTS, make_flowers
from tests.helpers.cifar_files import write_cifar10


def _as_array(image, generator):  # the PIL image as it arrives, channel-major
    return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)


def test_cifar_pictures_reach_the_transform_unchanged(tmp_path):
    root = write_cifar10(tmp_path)
    folder = root / "cifar-10-batches-py"
    data = classification_splits("cifar10", folder, _as_array, _as_array)
    with open(folder / "test_batch", "rb") as f:
        raw = pickle.load(f, encoding="bytes")
    image, label = data.test[3]
    row = raw[b"data"][3]  # 1024 red, 1024 green, 1024 blue values, row-major
    assert image.shape == (3, 32, 32) and label == raw[b"labels"][3]
    assert image.flatten().tolist() == list(row)
    assert data.num_classes == 10 and len(data.train) == 150 and len(data.test) == 20


def test_flowers_and_class_folder_splits(tmp_path):
    flowers = make_flowers(tmp_path / "flowers", LABELS, *PARTS)
    data = classification_splits("flowers102", flowers, _as_array, _as_array)
    assert len(data.train) == 6 and len(data.test) == 3 and data.num_classes == 3
    assert data.test.labels.tolist() == [LABELS[n - 1] - 1 for n in sorted(PARTS[2])]
    tree = make_tree(tmp_path / "tree")
    data = classification_splits("class_folders", tree, _as_array, _as_array, fraction=0.2)
    assert (len(data.train), len(data.test), data.num_classes) == (5, 6, 3)

"""DINO's weighted k-NN classifier takes labels in any numbering, as the retrieval metrics do
(one label coding, :func:`gspdml.evaluation.results.encode_labels`): negative, sparse and
64-bit integer ids and strings give the predictions and the top-1 of the slow loop of
test_knn_classifier.py. Before, the votes had ``max(label) + 1`` columns indexed by the label
itself: a negative label was an index error, a sparse id allocated a column per integer up to
it, and strings could not be given at all."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.knn_classifier import weighted_knn_predict, weighted_knn_top1
from tests.evaluation.test_knn_classifier import _slow_predict

NAMINGS = {
    "negative": [-3, -2, -1, 0, 1],
    "sparse": [-(10**12), 7, 4096, 10**15, 2**62],
    "strings": ["zebra", "ant", "moth", "cat", "bee"],  # their order is not the ints'
}


def _data(seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(5, 8))
    train_classes, test_classes = rng.integers(0, 5, 60), rng.integers(0, 5, 40)
    train = centres[train_classes] + 1.5 * rng.normal(size=(60, 8))
    test = centres[test_classes] + 1.5 * rng.normal(size=(40, 8))
    return train.astype(np.float32), train_classes, test.astype(np.float32), test_classes


@pytest.mark.parametrize("naming", NAMINGS)
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("k", [1, 10])
def test_any_labels_give_the_slow_loops_predictions_and_top1(naming, seed, k):
    train, train_classes, test, test_classes = _data(seed)
    names = NAMINGS[naming]
    train_labels = [names[c] for c in train_classes]
    test_labels = [names[c] for c in test_classes]
    if naming != "strings":
        train_labels, test_labels = np.array(train_labels), np.array(test_labels)
    expected = _slow_predict(train, train_labels, test, k, 0.07)
    got = weighted_knn_predict(torch.tensor(train), train_labels, torch.tensor(test), k, 0.07)
    assert got.tolist() == expected
    top1 = weighted_knn_top1(
        torch.tensor(train), train_labels, torch.tensor(test), test_labels, k, 0.07
    )
    slow_top1 = np.mean([p == y for p, y in zip(expected, list(test_labels))])
    assert top1 == pytest.approx(slow_top1, abs=1e-12)
    assert top1 > 0.3  # the classes are told apart: not a constant prediction


def test_the_smallest_label_wins_a_tie_in_the_labels_order():
    train = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    query = torch.tensor([[1.0, 0.0]])
    assert weighted_knn_predict(train, [-5, -7, 3], query, k=2).tolist() == [-7]
    assert weighted_knn_predict(train, ["b", "a", "c"], query, k=2).tolist() == ["a"]


def test_a_test_label_no_training_image_has_counts_as_wrong():
    train = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    test = torch.tensor([[1.0, 0.1], [0.1, 1.0]])
    assert weighted_knn_top1(train, [-1, 5], test, [-1, 6], k=1) == 0.5


def test_an_unlabelled_image_is_refused():
    train = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(ConfigError, match="train_labels: row 1 has no label"):
        weighted_knn_predict(train, ["a", None], train, k=1)
    with pytest.raises(ConfigError, match="test_labels: row 0 has no label"):
        weighted_knn_top1(train, ["a", "b"], train, [None, "b"], k=1)

"""The linear probe takes labels in any numbering, as DINO's k-NN classifier and the retrieval
metrics do (one label coding, :func:`gspdml.evaluation.top1.classifier_codes`): negative, sparse
and 64-bit integer ids and strings give exactly what the same probe gives when fed the labels
re-coded by hand as 0..C-1 in their sorted order (the same columns, so the same initialisation,
steps and predictions). Before, the labels were the classifier's column indices: a negative label
crashed in cross_entropy, and a sparse id needed one column per integer up to it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.linear_probe import (
    ProbeSettings,
    linear_probe_top1,
    top1,
    train_linear_probe,
)
from tests.evaluation.test_knn_classifier_labels import NAMINGS

SETTINGS = ProbeSettings(epochs=20, batch_size=16, lr=0.5, seed=3)


def _data(seed):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(5, 6)) * 2
    train_classes, test_classes = rng.integers(0, 5, 60), rng.integers(0, 5, 30)
    train = centres[train_classes] + 1.5 * rng.normal(size=(60, 6))
    test = centres[test_classes] + 1.5 * rng.normal(size=(30, 6))
    return (
        torch.tensor(train, dtype=torch.float32),
        train_classes,
        torch.tensor(test, dtype=torch.float32),
        test_classes,
    )


def _by_hand(labels, order):
    """``labels`` re-coded as their position among ``order`` (sorted distinct labels)."""
    return torch.tensor([order.index(label) for label in labels])


@pytest.mark.parametrize("naming", NAMINGS)
def test_any_labels_give_the_probe_of_the_labels_recoded_by_hand(naming):
    train, train_classes, test, test_classes = _data(0)
    names = NAMINGS[naming]
    train_labels = [names[c] for c in train_classes]
    test_labels = [names[c] for c in test_classes]
    order = sorted(set(train_labels))
    reference = train_linear_probe(train, _by_hand(train_labels, order), len(order), SETTINGS)
    expected_each = [
        top1(reference, test[i : i + 1], _by_hand([test_labels[i]], order)) for i in range(30)
    ]
    given = (np.array(train_labels), np.array(test_labels))
    for train_given, test_given in ((train_labels, test_labels), given):
        got = linear_probe_top1(train, train_given, test, test_given, SETTINGS)
        assert got == pytest.approx(np.mean(expected_each), abs=1e-12)
    assert 0.4 < np.mean(expected_each) < 1.0  # told apart, not perfectly: a real comparison
    # the same predictions image by image (the probe is deterministic per seed)
    got_each = [
        linear_probe_top1(train, train_labels, test[i : i + 1], [test_labels[i]], SETTINGS)
        for i in range(30)
    ]
    assert got_each == expected_each


def test_a_test_label_no_training_image_has_counts_as_wrong():
    train, train_classes, test, test_classes = _data(1)
    train_labels = [int(c) * 10 - 20 for c in train_classes]
    known = [int(c) * 10 - 20 for c in test_classes]
    unseen = [lab if i % 3 else 999 for i, lab in enumerate(known)]  # every third one unseen
    order = sorted(set(train_labels))
    reference = train_linear_probe(train, _by_hand(train_labels, order), len(order), SETTINGS)
    with torch.no_grad():
        predicted = [order[int(c)] for c in reference(test).argmax(1)]
    expected = np.mean([p == y for p, y in zip(predicted, unseen)])
    assert linear_probe_top1(train, train_labels, test, unseen, SETTINGS) == expected
    assert expected < linear_probe_top1(train, train_labels, test, known, SETTINGS)


def test_unlabelled_images_class_indices_out_of_range_and_no_training_image_are_refused():
    train, train_classes, test, test_classes = _data(2)
    labels = [int(c) for c in train_classes]
    with pytest.raises(ConfigError, match="train_labels: row 1 has no label"):
        linear_probe_top1(train, [0, None, *labels[2:]], test, test_classes, SETTINGS)
    with pytest.raises(ConfigError, match="test_labels: row 0 has no label"):
        linear_probe_top1(train, labels, test, [None, *test_classes[1:].tolist()], SETTINGS)
    with pytest.raises(ConfigError, match=r"labels: class indices must lie in 0\.\.4, got -1"):
        train_linear_probe(train, torch.tensor(labels) - 1, 5, SETTINGS)
    with pytest.raises(ConfigError, match="train_labels: no training image"):
        linear_probe_top1(train[:0], [], test, test_classes, SETTINGS)

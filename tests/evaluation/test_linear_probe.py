"""The linear probe (gspdml.evaluation.linear_probe): a linear classifier trained by SGD on
frozen features. On linearly separable classes it separates them; on overlapping classes its
accuracy is that of scikit-learn's LogisticRegression (the same model, fit by L-BFGS), and its
predictions agree with it on almost every point; the training is deterministic per seed."""

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from gspdml.errors import ConfigError
from gspdml.evaluation.linear_probe import (
    ProbeSettings,
    linear_probe_top1,
    top1,
    train_linear_probe,
)

SETTINGS = ProbeSettings(epochs=30, batch_size=64, lr=0.5, seed=0)


def _blobs(seed, n, spread, classes=3, dim=5):
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(classes, dim)) * 3
    labels = rng.integers(0, classes, n)
    return (centres[labels] + spread * rng.normal(size=(n, dim))).astype(np.float32), labels


def test_separable_classes_are_separated():
    train, train_labels = _blobs(0, 150, 0.3)
    test, test_labels = _blobs(1, 90, 0.3)
    accuracy = linear_probe_top1(
        torch.tensor(train),
        torch.tensor(train_labels),
        torch.tensor(test),
        torch.tensor(test_labels),
        SETTINGS,
    )
    assert accuracy == 1.0
    # with the labels of the training set shuffled there is nothing to learn
    shuffled = np.random.default_rng(5).permutation(train_labels)
    chance = linear_probe_top1(
        torch.tensor(train),
        torch.tensor(shuffled),
        torch.tensor(test),
        torch.tensor(test_labels),
        SETTINGS,
    )
    assert chance < 0.7


def test_overlapping_classes_match_logistic_regression():
    train, train_labels = _blobs(2, 400, 2.5)
    test, test_labels = _blobs(3, 400, 2.5)
    probe = train_linear_probe(torch.tensor(train), torch.tensor(train_labels), 3, SETTINGS)
    ours = top1(probe, torch.tensor(test), torch.tensor(test_labels))
    reference = LogisticRegression(C=1e6, max_iter=5000).fit(train, train_labels)
    theirs = float(np.mean(reference.predict(test) == test_labels))
    assert 0.6 < theirs < 0.99  # overlapping, far from chance: the comparison means something
    assert abs(ours - theirs) <= 0.02
    with torch.no_grad():
        predicted = probe(torch.tensor(test)).argmax(1).numpy()
    assert np.mean(predicted == reference.predict(test)) >= 0.95


def test_the_probe_is_deterministic_per_seed_and_checks_its_settings():
    train, labels = _blobs(4, 64, 1.0)
    features, targets = torch.tensor(train), torch.tensor(labels)
    a = train_linear_probe(features, targets, 3, SETTINGS)
    b = train_linear_probe(features, targets, 3, SETTINGS)
    c = train_linear_probe(features, targets, 3, ProbeSettings(30, 64, 0.5, seed=1))
    assert torch.equal(a.weight, b.weight) and not torch.equal(a.weight, c.weight)
    with pytest.raises(ConfigError, match="probe_epochs"):
        ProbeSettings(epochs=0)
    with pytest.raises(ConfigError, match="probe_lr"):
        ProbeSettings(lr=0.0)

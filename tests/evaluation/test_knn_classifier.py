"""DINO's weighted k-NN classifier (gspdml.evaluation.knn_classifier) against a slow loop written
from Caron et al. 2021 (§4.1, Appendix): cosine similarities to every training feature, the k
most similar (the smaller index first among equals), votes exp(s / T) summed per class, the
largest total wins (the smaller label among equals)."""

import math

import numpy as np
import pytest
import torch

from gspdml.evaluation.knn_classifier import weighted_knn_predict, weighted_knn_top1


def _slow_predict(train, train_labels, test, k, temperature):
    """One test feature at a time, in float64 Python loops; labels of any kind that Python
    orders (ints, strings)."""
    train_labels = train_labels.tolist() if hasattr(train_labels, "tolist") else train_labels
    train = [np.asarray(f, dtype=np.float64) / np.linalg.norm(f) for f in train]
    predictions = []
    for query in test:
        query = np.asarray(query, dtype=np.float64) / np.linalg.norm(query)
        similarities = [float(np.dot(query, f)) for f in train]
        order = sorted(range(len(train)), key=lambda j: (-similarities[j], j))[:k]
        votes: dict = {}
        for j in order:
            label = train_labels[j]
            votes[label] = votes.get(label, 0.0) + math.exp(similarities[j] / temperature)
        best = max(votes.values())
        predictions.append(min(label for label, vote in votes.items() if vote == best))
    return predictions


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k, temperature", [(1, 0.07), (10, 0.07), (20, 0.07), (7, 1.0)])
def test_predictions_equal_the_slow_loop(seed, k, temperature):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(5, 8))
    train_labels = rng.integers(0, 5, 60)
    train = centres[train_labels] + 1.5 * rng.normal(size=(60, 8))
    test_labels = rng.integers(0, 5, 40)
    test = centres[test_labels] + 1.5 * rng.normal(size=(40, 8))
    got = weighted_knn_predict(
        torch.tensor(train, dtype=torch.float32),
        torch.tensor(train_labels),
        torch.tensor(test, dtype=torch.float32),
        k,
        temperature,
    )
    expected = _slow_predict(
        train.astype(np.float32), train_labels, test.astype(np.float32), k, temperature
    )
    assert got.tolist() == expected
    top1 = weighted_knn_top1(
        torch.tensor(train),
        torch.tensor(train_labels),
        torch.tensor(test),
        torch.tensor(test_labels),
        k,
        temperature,
    )
    assert top1 == pytest.approx(np.mean(np.asarray(expected) == test_labels), abs=1e-12)


def test_the_weights_decide_against_the_majority():
    """One close neighbour of class 0 against two farther ones of class 1: at T = 0.07 the
    close one outweighs both (exp(1/T) > 2 exp(0.8/T)); at T = 1 the majority wins."""
    train = torch.tensor([[1.0, 0.0], [0.8, 0.6], [0.8, -0.6]])
    labels = torch.tensor([0, 1, 1])
    query = torch.tensor([[1.0, 0.0]])
    assert weighted_knn_predict(train, labels, query, k=3, temperature=0.07).tolist() == [0]
    assert weighted_knn_predict(train, labels, query, k=3, temperature=1.0).tolist() == [1]
    # the features are normalised first: scaling a training feature changes nothing
    scaled = train * torch.tensor([[5.0], [0.1], [3.0]])
    assert weighted_knn_predict(scaled, labels, query, k=3, temperature=0.07).tolist() == [0]


def test_ties_pick_the_smaller_label_and_the_earlier_neighbour():
    train = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    query = torch.tensor([[1.0, 0.0]])
    # two identical neighbours of classes 2 and 1: equal votes, label 1 wins
    assert weighted_knn_predict(train, torch.tensor([2, 1, 0]), query, k=2).tolist() == [1]
    # k = 1 among two equal neighbours: the earlier (index 0, class 2) is the neighbour
    assert weighted_knn_predict(train, torch.tensor([2, 1, 0]), query, k=1).tolist() == [2]

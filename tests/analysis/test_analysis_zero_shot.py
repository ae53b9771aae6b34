"""Cross-class zero-shot prediction protocol (GSP paper App. 2.3) against a numpy reference."""

import numpy as np
import pytest
import torch

from gspdml.analysis.zero_shot import class_means, cross_class_prediction


def _reference(
    attributes: np.ndarray, embeddings: np.ndarray, repeats: int, ridge: float, seed: int
) -> dict:
    """Same splits (torch.randperm with the same generator), ridge by lstsq on the augmented system."""
    gen = torch.Generator().manual_seed(seed)
    c, m = attributes.shape
    l2, cos = [], []
    for _ in range(repeats):
        order = torch.randperm(c, generator=gen).numpy()
        seen, unseen = order[: c // 2], order[c // 2 :]
        aug_x = np.vstack([attributes[seen], np.sqrt(ridge) * np.eye(m)])
        aug_y = np.vstack([embeddings[seen], np.zeros((m, embeddings.shape[1]))])
        weights = np.linalg.lstsq(aug_x, aug_y, rcond=None)[0]
        hits_l2 = hits_cos = 0
        for i, u in enumerate(unseen):
            pred = attributes[u] @ weights
            dists = [np.linalg.norm(pred - embeddings[v]) for v in unseen]
            sims = [
                pred @ embeddings[v] / np.linalg.norm(pred) / np.linalg.norm(embeddings[v])
                for v in unseen
            ]
            hits_l2 += int(np.argmin(dists) == i)
            hits_cos += int(np.argmax(sims) == i)
        l2.append(hits_l2 / len(unseen))
        cos.append(hits_cos / len(unseen))
    return {"l2": np.mean(l2), "cosine": np.mean(cos)}


def test_matches_numpy_reference():
    rng = np.random.default_rng(0)
    attributes, embeddings = rng.random((10, 8)), rng.normal(size=(10, 6))
    got = cross_class_prediction(
        torch.from_numpy(attributes), torch.from_numpy(embeddings), repeats=50, seed=3
    )
    ref = _reference(attributes, embeddings, 50, 0.05, 3)
    assert got["l2"] == pytest.approx(ref["l2"], abs=1e-12)
    assert got["cosine"] == pytest.approx(ref["cosine"], abs=1e-12)


def test_linear_attributes_transfer_perfectly_and_noise_does_not():
    rng = np.random.default_rng(1)
    basis = rng.normal(size=(3, 8))  # attributes in a 3-D subspace: any 5 classes determine the map
    attributes = rng.normal(size=(10, 3)) @ basis
    embeddings = attributes @ rng.normal(size=(8, 4))
    got = cross_class_prediction(
        torch.from_numpy(attributes), torch.from_numpy(embeddings), repeats=100, ridge=1e-9
    )
    assert got["l2"] == pytest.approx(1.0) and got["cosine"] == pytest.approx(1.0)
    unrelated = cross_class_prediction(
        torch.from_numpy(attributes), torch.from_numpy(rng.normal(size=(10, 4))), repeats=300
    )
    assert unrelated["l2"] < 0.5  # chance is 0.2 for five held-out classes


def test_class_means_and_errors():
    values = torch.tensor([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0]])
    classes, means = class_means(values, torch.tensor([2, 2, 0]))
    assert classes.tolist() == [0, 2] and means.tolist() == [[5.0, 5.0], [2.0, 1.0]]
    with pytest.raises(ValueError, match="attribute vectors"):
        cross_class_prediction(torch.zeros(4, 2), torch.zeros(3, 2))
    with pytest.raises(ValueError, match="fitting half"):
        cross_class_prediction(torch.zeros(3, 2), torch.zeros(3, 2), fit_classes=2)

"""The supervised classification protocol (gspdml.workflows.classification): its learning-rate
schedule against the formula written out, and a run stopped after an epoch and resumed ends
with the weights and the top-1 of the run that never stopped."""

import math
import sys

import numpy as np
import pytest
import torch

from gspdml.data.classification import PilArrayDataset, classification_transforms
from gspdml.errors import ConfigError, TrainingError
from gspdml.models.backbones import build_backbone
from gspdml.pooling import build_pooling
from gspdml.training.checkpoint import save_state
from gspdml.workflows import classification
from gspdml.workflows.classification import (
    CHECKPOINT,
    ClassificationRecipe,
    Classifier,
    learning_rate,
    train_classifier,
)


def test_warmup_then_cosine():
    recipe = ClassificationRecipe(4, 8, "sgd", 0.4, 0.0, warmup_epochs=1)
    rates = [learning_rate(recipe, step, 5) for step in range(20)]
    warm = [0.4 * (s + 1) / 5 for s in range(5)]
    cosine = [0.2 * (1 + math.cos(math.pi * s / 15)) for s in range(15)]
    assert rates == pytest.approx(warm + cosine)


def _data(seed):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (24, 3, 12, 12), dtype=np.uint8)
    labels = np.arange(24) % 3
    images[labels == 1, 0] //= 4  # a class with less red: something to learn
    return images, labels


def _model():
    torch.manual_seed(0)
    backbone = build_backbone({"name": "small_cnn", "widths": [8, 16]}, 3)
    pooling = build_pooling({"name": "simpool", "gamma": 2.0}, in_channels=16)
    return Classifier(backbone, pooling, 16, 3)


def _run(run_dir, epochs, settings=None):
    train_images, train_labels = _data(0)
    test_images, test_labels = _data(1)
    train_transform, test_transform = classification_transforms(resize=12, crop=10)
    train = PilArrayDataset(train_images, train_labels, train_transform)
    test = PilArrayDataset(test_images, test_labels, test_transform)
    recipe = ClassificationRecipe(epochs, 6, "adamw", 1e-2, 0.05, warmup_epochs=1)
    model = _model()
    top1 = train_classifier(model, train, test, recipe, run_dir, settings or {"row": "x"})
    return model, top1


class Stopped(Exception):
    pass


@pytest.mark.slow
def test_a_resumed_run_ends_as_the_uninterrupted_one(tmp_path, monkeypatch):
    whole, top1 = _run(tmp_path / "whole", 2)

    def save_then_stop(*args, **kwargs):  # the run is killed once its first epoch is written
        save_state(*args, **kwargs)
        raise Stopped

    monkeypatch.setattr(classification, "save_state", save_then_stop)
    with pytest.raises(Stopped):
        _run(tmp_path / "resumed", 2)
    monkeypatch.setattr(classification, "save_state", save_state)
    resumed, resumed_top1 = _run(tmp_path / "resumed", 2)  # started again: epoch 2
    assert resumed_top1 == top1
    for (name, a), b in zip(whole.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(_model().fc.weight, whole.fc.weight)  # the epochs did change it
    with pytest.raises(ConfigError, match="classification run of other settings"):
        _run(tmp_path / "whole", 2, {"row": "another"})


def test_a_non_finite_loss_stops_the_run_and_names_it(tmp_path, monkeypatch):
    healthy = _model

    def broken():
        model = healthy()
        with torch.no_grad():
            model.fc.bias[0] = float("nan")
        return model

    monkeypatch.setattr(sys.modules[__name__], "_model", broken)
    with pytest.raises(TrainingError, match=r"the loss is nan at epoch 1, step 1"):
        _run(tmp_path / "nan", 1)
    assert not (tmp_path / "nan" / CHECKPOINT).exists()


def test_max_logits_is_the_largest_logit_over_the_k_pooled_vectors():
    """Psomas thesis Table 3.12, k (max): class c scores max_j (W u_j + b)_c, u_j the pooling's
    k vectors; written out here as a loop over images, classes and vectors."""
    torch.manual_seed(1)
    backbone = build_backbone({"name": "small_cnn", "widths": [8, 16]}, 3)
    spec = {"name": "simpool", "gamma": 2.0, "k": 3, "init": "kmeans", "use_beta": True}
    pooling = build_pooling(spec, in_channels=16)
    with torch.no_grad():
        pooling.beta.fill_(0.3)
    model = Classifier(backbone, pooling, 16, 4, max_logits=True).eval()
    images = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        logits = model(images)
        vectors = pooling.vectors(backbone(images))
        # the vectors are those the pooling combines: combine max is their elementwise maximum
        assert torch.allclose(vectors.amax(dim=1), pooling(backbone(images)).vector)
        for b in range(2):
            for c in range(4):
                scores = [
                    float(model.fc.weight[c] @ vectors[b, j] + model.fc.bias[c]) for j in range(3)
                ]
                assert float(logits[b, c]) == pytest.approx(max(scores), rel=1e-5, abs=1e-6)
    gap = build_pooling("gap", in_channels=16)
    with pytest.raises(ConfigError, match="GAP gives one vector|gives one vector"):
        Classifier(backbone, gap, 16, 4, max_logits=True)

"""A split without images has no classification accuracy (0 / 0): the top-1 of a classifier, the
linear probe's, DINO's k-NN classifier's and the ImageNet-9 accuracy all refuse it with the
error the retrieval metrics raise for a split without queries (:class:`NoQueryToScore`, through
:func:`gspdml.evaluation.top1.fraction_correct`). Before, the same empty split gave four
answers: a bare ValueError (top1_accuracy), NaN (linear_probe.top1 and the k-NN top-1, a mean
of nothing) and a ZeroDivisionError (in9_accuracy)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from gspdml.evaluation.background_robustness import in9_accuracy
from gspdml.evaluation.knn_classifier import weighted_knn_top1
from gspdml.evaluation.linear_probe import ProbeSettings, linear_probe_top1, top1
from gspdml.evaluation.metrics import NoQueryToScore
from gspdml.evaluation.top1 import fraction_correct, top1_accuracy

TRAIN = torch.randn(12, 4, generator=torch.Generator().manual_seed(0))
TRAIN_LABELS = torch.arange(12) % 3
NO_FEATURES, NO_LABELS = torch.zeros(0, 4), torch.zeros(0, dtype=torch.int64)
NONE = "no image to score: {} has no images, so its accuracy is undefined; evaluate a split"

CALLS = {
    "top1_accuracy": (lambda: top1_accuracy(lambda x: x, []), "the split"),
    "linear_probe.top1": (
        lambda: top1(nn.Linear(4, 3), NO_FEATURES, NO_LABELS),
        "the test features' split",
    ),
    "linear_probe_top1": (
        lambda: linear_probe_top1(
            TRAIN, TRAIN_LABELS, NO_FEATURES, NO_LABELS, ProbeSettings(epochs=1)
        ),
        "the test features' split",
    ),
    "weighted_knn_top1": (
        lambda: weighted_knn_top1(TRAIN, TRAIN_LABELS, NO_FEATURES, NO_LABELS, k=3),
        "the test features' split",
    ),
    "in9_accuracy": (
        lambda: in9_accuracy(nn.Identity(), nn.Linear(4, 1000), []),  # type: ignore[arg-type]
        "the ImageNet-9 variation",
    ),
}


@pytest.mark.parametrize("name", CALLS)
def test_an_empty_split_is_refused_as_such(name):
    call, split = CALLS[name]
    with pytest.raises(NoQueryToScore, match=NONE.format(split)):
        call()


def test_a_split_with_images_is_the_fraction_correct():
    assert fraction_correct(3, 4) == 0.75 and fraction_correct(0, 1) == 0.0
    one = torch.tensor([[1.0, 0.0, 0.0, 0.0]])
    probe = nn.Linear(4, 3)
    with torch.no_grad():
        probe.weight.copy_(torch.eye(3, 4))
        probe.bias.zero_()
    assert top1(probe, one, torch.tensor([0])) == 1.0
    assert top1(probe, one, torch.tensor([2])) == 0.0

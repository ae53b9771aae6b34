"""The PML drop-in against pytorch-metric-learning itself over the grid of its options that
change the numbers (k below, at and above the class sizes; avg_of_avgs; return_per_class), in
its three modes (leave-one-out, query -> reference, reference holding the queries), with a
query label absent from the references (a lone query) and negative labels; tie-free inputs, so
the neighbours of PML's faiss search are the exact ones."""

from __future__ import annotations

import math

import pytest
import torch
from pytorch_metric_learning.utils import accuracy_calculator as pml

from gspdml.evaluation.compat import AccuracyCalculator

KNN = (
    "precision_at_1",
    "mean_average_precision",
    "mean_average_precision_at_r",
    "mean_reciprocal_rank",
    "r_precision",
)
OPTIONS = [
    {},
    {"k": "max_bin_count"},
    {"k": 1},
    {"k": 3},
    {"k": 500},
    {"avg_of_avgs": True},
    {"k": 3, "avg_of_avgs": True},
    {"return_per_class": True},
    {"k": "max_bin_count", "return_per_class": True},
]


def _split(mode: str):
    g = torch.Generator().manual_seed(1)
    q, r = torch.randn(50, 6, generator=g), torch.randn(80, 6, generator=g)
    q_lab, r_lab = torch.randint(0, 7, (50,), generator=g), torch.randint(0, 9, (80,), generator=g)
    q_lab[-1] = 100  # no reference holds it
    q_lab, r_lab = -q_lab - 1, -r_lab - 1  # negative labels
    if mode == "leave-one-out":
        return q, q_lab, None, None, False
    if mode == "reference holds the queries":
        return q, q_lab, torch.cat([q, r]), torch.cat([q_lab, r_lab]), True
    return q, q_lab, r, r_lab, False


def _same(a, b) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b))
        )
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-6)


@pytest.mark.filterwarnings("ignore")  # PML warns that MAP@R is cut when k < max R
@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize(
    "mode", ["leave-one-out", "query -> reference", "reference holds the queries"]
)
def test_the_drop_in_equals_pml(mode, options):
    split = _split(mode)
    theirs = pml.AccuracyCalculator(include=KNN, device=torch.device("cpu"), **options)
    ours = AccuracyCalculator(include=KNN, **options)
    expected, got = theirs.get_accuracy(*split), ours.get_accuracy(*split)
    assert list(got) == list(expected)
    for name in KNN:
        assert _same(got[name], expected[name]), (name, got[name], expected[name])

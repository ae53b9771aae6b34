import math

import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import reducers as pml_reducers

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES


def _dist(a, b):
    return math.sqrt(sum((float(x) - float(y)) ** 2 for x, y in zip(a, b)))


def test_c1_equals_slow_loop(make_batch, valid_pairs):
    emb, labels = make_batch(seed=1)
    total = 0.0
    for i, j, same in valid_pairs(labels, labels, torch.arange(len(labels))):
        s = float(emb[i].detach() @ emb[j].detach())
        total += (1.0 - s) if same else max(s - 0.5, 0.0)
    expected = total / len(labels)
    assert LOSSES.build("c1")(emb, labels).item() == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("reduction", ["avg_nonzero", "mean"])
def test_c2_equals_slow_loop_with_reference(make_batch, valid_pairs, reduction):
    emb, labels = make_batch(seed=2)
    ref, ref_labels = make_batch(seed=3, per_class=3)
    ref_self = torch.tensor([-1] * len(labels))
    ref_self[0] = 5
    loss = LOSSES.build({"c2": {"pos_margin": 0.2, "neg_margin": 0.9, "reduction": reduction}})
    value = loss(emb, labels, reference=ref, reference_labels=ref_labels, reference_self=ref_self)
    pos, neg = [], []
    for i, j, same in valid_pairs(labels, ref_labels, ref_self):
        d = _dist(emb[i].detach(), ref[j].detach())
        (pos if same else neg).append(max(d - 0.2, 0.0) if same else max(0.9 - d, 0.0))
    if reduction == "mean":
        expected = sum(pos) / len(pos) + sum(neg) / len(neg)
    else:
        expected = sum(pos) / sum(p > 0 for p in pos) + sum(neg) / sum(n > 0 for n in neg)
    assert value.item() == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("reducer", [pml_reducers.MeanReducer(), pml_reducers.AvgNonZeroReducer()])
def test_c2_matches_pytorch_metric_learning(make_batch, reducer):
    emb, labels = make_batch(seed=4, classes=8, per_class=8, dim=16)
    reduction = "mean" if isinstance(reducer, pml_reducers.MeanReducer) else "avg_nonzero"
    ours = LOSSES.build({"c2": {"pos_margin": 0.2652, "neg_margin": 1.2, "reduction": reduction}})(
        emb, labels
    )
    theirs = pml_losses.ContrastiveLoss(pos_margin=0.2652, neg_margin=1.2, reducer=reducer)(
        emb, labels
    )
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-9)


def test_c2_rejects_unknown_reduction():
    with pytest.raises(
        ConfigError,
        match=r"loss\.reduction: unknown value 'sum'; allowed: avg_nonzero, mean, anchor_mean$",
    ):
        LOSSES.build({"c2": {"reduction": "sum"}})


def test_c2_built_from_python_refuses_an_unknown_reduction_as_a_config_does():
    with pytest.raises(
        ConfigError,
        match=r"reduction: unknown value 'sum'; allowed: avg_nonzero, mean, anchor_mean$",
    ):
        type(LOSSES.build("c2"))(reduction="sum")

import math

import pytest
import torch
from pytorch_metric_learning import losses as pml_losses
from pytorch_metric_learning import miners as pml_miners

from gspdml.losses import LOSSES


def _official_ms(emb, labels, alpha, beta, base, epsilon, mining=True):
    """Per-anchor loop in the style of the official MS code: mine, skip incomplete anchors, / B."""
    e = emb.detach()
    sim = e @ e.T
    total = 0.0
    for i in range(len(e)):
        pos = [float(sim[i, j]) for j in range(len(e)) if j != i and labels[j] == labels[i]]
        neg = [float(sim[i, j]) for j in range(len(e)) if labels[j] != labels[i]]
        if mining:
            pos, neg = (
                [s for s in pos if s - epsilon < max(neg)],
                [s for s in neg if s + epsilon > min(pos)],
            )
            if not pos or not neg:
                continue
        total += math.log(1 + sum(math.exp(-alpha * (s - base)) for s in pos)) / alpha
        total += math.log(1 + sum(math.exp(beta * (s - base)) for s in neg)) / beta
    return total / len(e)


@pytest.mark.parametrize("mining", [True, False])
def test_ms_equals_official_style_loop(make_batch, mining):
    emb, labels = make_batch(seed=15, classes=4, per_class=5, dim=6)
    loss = LOSSES.build({"ms": {"alpha": 14.35, "beta": 75.83, "base": 0.66, "mining": mining}})
    expected = _official_ms(emb, labels, 14.35, 75.83, 0.66, 0.1, mining)
    assert loss(emb, labels).item() == pytest.approx(expected, rel=1e-9)


def test_ms_mining_changes_the_loss(make_batch):
    emb, labels = make_batch(seed=16, classes=4, per_class=5, dim=6)
    mined = LOSSES.build({"ms": {"mining": True}})(emb, labels)
    every = LOSSES.build({"ms": {"mining": False}})(emb, labels)
    assert abs(mined.item() - every.item()) > 1e-3


@pytest.mark.parametrize("mining", [True, False])
def test_ms_matches_pytorch_metric_learning(make_batch, mining):
    emb, labels = make_batch(seed=17, classes=8, per_class=8, dim=16)
    ours = LOSSES.build(
        {"multi_similarity": {"alpha": 2, "beta": 40, "base": 0.5, "mining": mining}}
    )(emb, labels)
    pml = pml_losses.MultiSimilarityLoss(alpha=2, beta=40, base=0.5)
    theirs = (
        pml(emb, labels, pml_miners.MultiSimilarityMiner(epsilon=0.1)(emb, labels))
        if mining
        else pml(emb, labels)
    )
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-9)
    ours.backward()
    assert emb.grad.abs().sum() > 0


def test_ms_against_reference_set_excludes_self_by_index(make_batch):
    emb, labels = make_batch(seed=18, classes=4, per_class=4)
    loss = LOSSES.build({"ms": {"mining": False}})  # the miner would drop the easy self-pair anyway
    in_batch = loss(emb, labels)
    as_reference = loss(
        emb,
        labels,
        reference=emb.detach(),
        reference_labels=labels,
        reference_self=torch.arange(16),
    )
    with_self = loss(emb, labels, reference=emb.detach(), reference_labels=labels)
    assert as_reference.item() == pytest.approx(in_batch.item(), rel=1e-12)
    assert abs(with_self.item() - in_batch.item()) > 1e-6

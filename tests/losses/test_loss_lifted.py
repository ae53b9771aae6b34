import math

import pytest
import torch
from pytorch_metric_learning import losses as pml_losses

from gspdml.losses import LOSSES


def _slow_lifted(emb, labels, neg_margin, pos_margin):
    """Song et al. 2016 Eq. 4 over unordered positive pairs."""
    e = emb.detach()
    n = len(e)
    d = [[math.sqrt(float(((e[i] - e[j]) ** 2).sum())) for j in range(n)] for i in range(n)]
    terms = []
    for i in range(n):
        for j in range(i + 1, n):
            if labels[i] != labels[j]:
                continue
            inner = sum(math.exp(neg_margin - d[i][k]) for k in range(n) if labels[k] != labels[i])
            inner += sum(math.exp(neg_margin - d[j][m]) for m in range(n) if labels[m] != labels[j])
            terms.append(max(math.log(inner) + d[i][j] - pos_margin, 0.0) ** 2)
    return sum(terms) / (2 * len(terms))


def test_lifted_equals_paper_loop(make_batch):
    emb, labels = make_batch(seed=19, classes=3, per_class=4)
    ours = LOSSES.build({"lifted": {"neg_margin": 1.0, "pos_margin": 0.1}})(emb, labels)
    assert ours.item() == pytest.approx(_slow_lifted(emb, labels, 1.0, 0.1), rel=1e-10)


def test_lifted_matches_pytorch_metric_learning(make_batch):
    emb, labels = make_batch(seed=20, classes=8, per_class=8, dim=16)
    ours = LOSSES.build({"lifted_structure": {"neg_margin": 0.8}})(emb, labels)
    theirs = pml_losses.LiftedStructureLoss(neg_margin=0.8, pos_margin=0)(emb, labels)
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-9)


def test_lifted_against_reference_uses_row_and_column_negatives(make_batch):
    emb, labels = make_batch(seed=21, classes=3, per_class=2)
    ref, ref_labels = make_batch(seed=22, classes=3, per_class=3)
    loss = LOSSES.build({"lifted": {}})
    ours = loss(
        emb, labels, reference=ref, reference_labels=ref_labels, reference_self=torch.full((6,), -1)
    )
    e, r = emb.detach(), ref.detach()
    d = torch.cdist(e, r)
    terms = []
    for i in range(len(e)):
        for j in range(len(r)):
            if labels[i] != ref_labels[j]:
                continue
            inner = sum(
                math.exp(1.0 - d[i, k]) for k in range(len(r)) if ref_labels[k] != labels[i]
            )
            inner += sum(
                math.exp(1.0 - d[m, j]) for m in range(len(e)) if labels[m] != ref_labels[j]
            )
            terms.append(max(math.log(inner) + float(d[i, j]), 0.0) ** 2 / 2)
    assert ours.item() == pytest.approx(sum(terms) / len(terms), rel=1e-9)


def test_lifted_without_negatives_is_zero_with_finite_gradient(make_batch):
    emb, _ = make_batch(seed=23, classes=1, per_class=4)
    value = LOSSES.build({"lifted": {}})(emb, torch.zeros(4, dtype=torch.long))
    value.backward()
    assert value.item() == 0.0 and torch.isfinite(emb.grad).all()

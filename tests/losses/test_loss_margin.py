import math

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES


def _terms(emb, labels, beta_of, alpha, valid_pairs):
    e = emb.detach()
    terms = []
    for i, j, same in valid_pairs(labels, labels, torch.arange(len(labels))):
        d = math.sqrt(float(((e[i] - e[j]) ** 2).sum()))
        iota = 1.0 if same else -1.0
        terms.append(max(iota * (d - beta_of(i)) + alpha, 0.0))
    return terms


@pytest.mark.parametrize("reduction", ["mean", "avg_nonzero"])
def test_generalized_contrastive_equals_slow_loop(make_batch, valid_pairs, reduction):
    emb, labels = make_batch(seed=5)
    loss = LOSSES.build(
        {"generalized_contrastive": {"beta": 0.9, "alpha": 0.3, "reduction": reduction}}
    )
    terms = _terms(emb, labels, lambda i: 0.9, 0.3, valid_pairs)
    divisor = len(terms) if reduction == "mean" else sum(t > 0 for t in terms)
    assert loss(emb, labels).item() == pytest.approx(sum(terms) / divisor, rel=1e-10)


def test_generalized_contrastive_is_c2_with_mapped_margins(make_batch):
    """m_pos = beta - alpha, m_neg = beta + alpha (Gürbüz thesis §2.1.1): each pair costs the same."""
    emb, labels = make_batch(seed=6)
    beta, alpha = 1.0, 0.3
    gc = LOSSES.build({"gc": {"beta": beta, "alpha": alpha, "reduction": "avg_nonzero"}})
    c2 = LOSSES.build({"c2": {"pos_margin": beta - alpha, "neg_margin": beta + alpha}})
    same = labels[0] == labels
    # anchor 0 against its positives only (its own copy is row 0 of that set), then its negatives only
    for mask, self_column in ((same, 0), (~same, -1)):
        args = dict(
            reference=emb[mask],
            reference_labels=labels[mask],
            reference_self=torch.tensor([self_column]),
        )
        ours = gc(emb[:1], labels[:1], **args)
        assert ours.item() == pytest.approx(c2(emb[:1], labels[:1], **args).item(), rel=1e-10)
        assert ours.item() > 0


def test_margin_loss_per_class_learnable_beta(make_batch, valid_pairs):
    emb, labels = make_batch(seed=7)
    loss = LOSSES.build(
        {
            "margin": {
                "alpha": 0.2,
                "beta": 1.0,
                "learn_beta": True,
                "beta_per_class": True,
                "nu": 0.1,
            }
        },
        num_classes=4,
    )
    with torch.no_grad():
        loss.beta.copy_(torch.tensor([0.8, 1.0, 1.2, 1.4]))
    value = loss(emb, labels)
    betas = [0.8, 1.0, 1.2, 1.4]
    terms = _terms(emb, labels, lambda i: betas[int(labels[i])], 0.2, valid_pairs)
    reg = 0.1 * sum(betas[int(y)] for y in labels) / len(labels)
    assert value.item() == pytest.approx(sum(terms) / sum(t > 0 for t in terms) + reg, rel=1e-6)
    value.backward()
    assert isinstance(loss.beta, torch.nn.Parameter) and loss.beta.grad.abs().sum() > 0
    assert emb.grad.abs().sum() > 0


def test_margin_loss_fixed_beta_has_no_parameters(make_batch):
    loss = LOSSES.build({"margin": {"beta": 1.2}})
    assert list(loss.parameters()) == []
    with pytest.raises(ConfigError, match="margin.beta_per_class"):
        LOSSES.build({"margin": {"beta_per_class": True}})

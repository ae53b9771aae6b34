"""MoCHi (Kalantidis et al., NeurIPS 2020) as the Psomas thesis adapts it (Table 2.4), against loops."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.losses import build_loss


def _batch():
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 4])
    return F.normalize(torch.randn(8, 4, generator=g, dtype=torch.float64), dim=1), labels


def _hardest(emb, labels, a, k):
    negs = [j for j in range(len(labels)) if labels[j] != labels[a]]
    return sorted(sorted(negs, key=lambda j: -float(emb[a] @ emb[j]))[:k])


def _loop(emb, labels, kind, k, lam, margin):
    """Clean similarity contrastive plus w times the synthetic negatives, each ``[s - m]_+``,
    summed per anchor and averaged over the anchors with synthetic points."""
    per_anchor = []
    for a in range(len(labels)):
        hard = _hardest(emb, labels, a, k)
        pairs = itertools.combinations(hard, 2) if kind == "neg_neg" else ((a, n) for n in hard)
        terms = []
        for f, s in pairs:
            v = F.normalize(lam * emb[f] + (1 - lam) * emb[s], dim=0)
            terms.append(max(float(emb[a] @ v) - margin, 0.0))
        if terms:
            per_anchor.append(sum(terms))
    return sum(per_anchor) / len(per_anchor)


@pytest.mark.parametrize("kind", ["neg_neg", "anc_neg"])
def test_mochi_mixes_the_hardest_negatives_into_negatives(kind):
    emb, labels = _batch()
    spec = {"loss": {"contrastive_similarity": {"margin": -0.3}}, "pairs": kind}
    loss = build_loss({"mochi": {**spec, "hard_negatives": 3}}, embedding_dim=4, num_classes=5)
    clean = float(loss.base.clean(emb, labels))
    expected = clean + 0.4 * _loop(emb, labels, kind, 3, 0.3, -0.3)
    assert loss(emb, labels, lam=0.3).item() == pytest.approx(expected, rel=1e-10)


def test_factor_ranges_and_synthetic_points_per_anchor():
    emb, labels = _batch()
    loss = build_loss({"mochi": {"synthetic": 2}}, embedding_dim=4, num_classes=5)
    torch.manual_seed(0)
    assert float(loss._draw_lambda(2000, emb, "anc_neg").max()) < 0.5
    alpha = loss._draw_lambda(2000, emb, "neg_neg")
    assert float(alpha.max()) > 0.9 and float(alpha.min()) >= 0.0
    all_pairs = build_loss("mochi", embedding_dim=4, num_classes=5)
    full = all_pairs._select(
        torch.tensor([[a, f, s] for a in range(3) for f in range(4) for s in range(f + 1, 4)])
    )
    kept = loss._select(full)
    counts = torch.bincount(kept[:, 0], minlength=3).tolist()
    assert counts == [2, 2, 2] and {tuple(r) for r in kept.tolist()} <= {
        tuple(r) for r in full.tolist()
    }
    assert kept.tolist() == sorted(kept.tolist())
    seen = {tuple(r) for _ in range(30) for r in loss._select(full).tolist()}
    assert seen == {tuple(r) for r in full.tolist()}  # every pair can be drawn


def test_bad_options_are_named():
    for options, field in (
        ({"pairs": "pos_neg"}, "loss.pairs"),
        ({"synthetic": 0}, "loss.synthetic"),
        ({"loss": "proxy_anchor"}, "loss.loss"),
    ):
        with pytest.raises(ConfigError, match=field):
            build_loss({"mochi": options}, embedding_dim=4, num_classes=5)

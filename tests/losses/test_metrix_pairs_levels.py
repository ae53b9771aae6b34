"""Metrix's pos-pos / neg-neg mixing pairs and level combinations (Psomas thesis Tables 2.4-2.6)
against loops."""

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import ConfigError, TrainingError
from gspdml.losses import build_loss
from gspdml.losses.metrix_pairs import mixing_triples, positivity
from gspdml.models import Embedder
from gspdml.pooling.simple import GAP


def _pairs_reference(labels, kind, sim=None, k=None):
    """``U+(a)^2`` / ``U-(a)^2`` of every anchor, each unordered pair once (first < second)."""
    rows, n = [], len(labels)
    for a in range(n):
        negs = [j for j in range(n) if labels[j] != labels[a]]
        if k is not None:
            negs = sorted(negs, key=lambda j: -float(sim[a, j]))[:k]
        pos = [p for p in range(n) if p != a and labels[p] == labels[a]]
        pool = pos if kind == "pos_pos" else negs
        rows += [(a, f, s) for f, s in itertools.combinations(sorted(pool), 2)]
    return rows


@pytest.mark.parametrize("kind", ["pos_pos", "neg_neg"])
@pytest.mark.parametrize("k", [None, 3])
def test_pos_pos_and_neg_neg_triples_equal_loops(kind, k):
    g = torch.Generator().manual_seed(1)
    labels = torch.tensor([0, 0, 1, 2, 2, 2, 1, 3, 0])
    sim = torch.randn(9, 9, generator=g)
    got = [tuple(r) for r in mixing_triples(labels, kind, sim if k else None, k).tolist()]
    assert got == _pairs_reference(labels.tolist(), kind, sim, k)


def test_pairs_by_hand_and_their_labels():
    """Labels 0 0 0 1 1: anchor 0 has positives {1, 2} (one pos-pos pair) and negatives {3, 4}
    (one neg-neg pair); anchor 3 has no pos-pos pair (one positive) and neg-neg pairs of {0, 1, 2}."""
    labels = torch.tensor([0, 0, 0, 1, 1])
    pos_pos = mixing_triples(labels, "pos_pos").tolist()
    assert pos_pos == [[0, 1, 2], [1, 0, 2], [2, 0, 1]]
    neg_neg = mixing_triples(labels, "neg_neg").tolist()
    assert [r for r in neg_neg if r[0] in (0, 3)] == [[0, 3, 4], [3, 0, 1], [3, 0, 2], [3, 1, 2]]
    lam = torch.tensor(0.3, dtype=torch.float64)
    for kind, expected in (("pos_pos", 1.0), ("neg_neg", 0.0), ("pos_neg", 0.3), ("anc_neg", 0.3)):
        y = positivity(labels, mixing_triples(labels, kind), lam)
        torch.testing.assert_close(y, torch.full_like(y, expected))


def _similarity_contrastive_loop(emb, mixed, triples, y, margin):
    """Eq. 2.12 generalised to any label: per anchor sum of -y s + (1 - y)[s - m]_+, mean over the
    anchors with mixed examples."""
    per_anchor = {}
    for (a, _, _), v, yj in zip(triples, mixed.tolist(), y):
        s = sum(p * q for p, q in zip(emb[a].tolist(), v))
        per_anchor[a] = per_anchor.get(a, 0.0) - yj * s + (1 - yj) * max(s - margin, 0.0)
    return sum(per_anchor.values()) / len(per_anchor)


@pytest.mark.parametrize("kind,y", [("pos_pos", 1.0), ("neg_neg", 0.0)])
def test_pos_pos_mixtures_only_attract_and_neg_neg_only_repel(kind, y):
    g = torch.Generator().manual_seed(2)
    labels = torch.tensor([0, 0, 0, 1, 1, 2])
    emb = F.normalize(torch.randn(6, 4, generator=g, dtype=torch.float64), dim=1)
    loss = build_loss(
        {
            "metrix": {
                "level": "embedding",
                "pairs": kind,
                "loss": {"contrastive_similarity": {"margin": -0.5}},
            }
        },
        embedding_dim=4,
        num_classes=3,
    )
    triples = _pairs_reference(labels.tolist(), kind)
    mixed = F.normalize(torch.stack([0.35 * emb[f] + 0.65 * emb[s] for _, f, s in triples]), dim=1)
    expected = float(loss.base.clean(emb, labels)) + 0.4 * _similarity_contrastive_loop(
        emb, mixed, triples, [y] * len(triples), -0.5
    )
    assert loss(emb, labels, lam=0.35).item() == pytest.approx(expected, rel=1e-10)


def _linear_embedder(seed=0):
    torch.manual_seed(seed)
    return Embedder(nn.Identity(), GAP(3), nn.Conv2d(4, 3, 1).double())


def test_a_list_of_levels_draws_one_per_iteration_and_hard_negatives_stay_at_input():
    """Tables 2.5-2.6, mixup type combinations: each iteration is one of the single-level
    losses, and over a few iterations every level occurs; ``hard_negatives`` applies only when
    the input level is drawn (``{1, all}`` for ``{input, feature}``)."""
    model = _linear_embedder()
    labels = torch.tensor([0, 0, 1, 1, 2, 3])
    images = torch.randn(6, 4, 3, 3, dtype=torch.float64)
    spec = {"loss": {"contrastive": {"neg_margin": 1.5}}, "hard_negatives": 1}
    levels = ["input", "feature", "embedding"]

    def single(level):
        one = build_loss({"metrix": {**spec, "level": level}}, embedding_dim=3, num_classes=4)
        return round(
            one.training_objective(model, images, labels, kind="anc_neg", lam=0.7).item(), 12
        )

    singles = {level: single(level) for level in levels}
    assert len(set(singles.values())) == 3  # k = 1 at input differs from all pairs at feature
    combo = build_loss({"metrix": {**spec, "level": levels}}, embedding_dim=3, num_classes=4)
    assert combo.level == levels and combo.batch_requirements().reads == {"embed_features"}
    seen = []
    torch.manual_seed(0)
    for _ in range(24):
        value = combo.training_objective(model, images, labels, kind="anc_neg", lam=0.7)
        seen.append(next(lv for lv, v in singles.items() if v == round(value.item(), 12)))
    assert set(seen) == set(levels)
    for level in levels:
        forced = combo.training_objective(
            model, images, labels, kind="anc_neg", lam=0.7, level=level
        )
        assert round(forced.item(), 12) == singles[level]


def test_pair_and_level_lists_are_checked_and_named():
    build = lambda **o: build_loss({"metrix": o}, embedding_dim=3, num_classes=4)  # noqa: E731
    assert build(pairs=["pos_neg", "pos_pos"]).kinds == ("pos_neg", "pos_pos")
    assert build(pairs="random").kinds == ("pos_neg", "anc_neg")
    for bad in (["pos_neg", "pos_neg"], [], ["random"], "neg_pos"):
        with pytest.raises(ConfigError, match="loss.pairs"):
            build(pairs=bad)
    with pytest.raises(ConfigError, match="loss.level"):
        build(level=["feature", "pixels"])
    with pytest.raises(TrainingError, match="training_objective"):
        build(level=["embedding", "feature"])(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]))


def test_hard_negatives_per_level_select_the_k_most_similar_negatives():
    """Tables 2.5-2.6, ``k = 20 / 40`` at the feature and embedding levels: ``hard_negatives``
    as a mapping of levels; here ``k = 2`` at the embedding level, anchor-negative pairs, against
    a loop that sorts each anchor's negatives by clean similarity."""
    g = torch.Generator().manual_seed(6)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3])
    emb = F.normalize(torch.randn(7, 4, generator=g, dtype=torch.float64), dim=1)
    spec = {"level": "embedding", "loss": {"contrastive_similarity": {"margin": -0.5}}}
    loss = build_loss(
        {"metrix": {**spec, "hard_negatives": {"embedding": 2}}}, embedding_dim=4, num_classes=4
    )
    triples = []
    for a in range(7):
        negs = [j for j in range(7) if labels[j] != labels[a]]
        hardest = sorted(negs, key=lambda j: -float(emb[a] @ emb[j]))[:2]
        triples += [(a, a, n) for n in sorted(hardest)]
    mixed = F.normalize(torch.stack([0.6 * emb[a] + 0.4 * emb[n] for a, _, n in triples]), dim=1)
    expected = float(loss.base.clean(emb, labels)) + 0.4 * _similarity_contrastive_loop(
        emb, mixed, triples, [0.6] * len(triples), -0.5
    )
    assert loss(emb, labels, kind="anc_neg", lam=0.6).item() == pytest.approx(expected, rel=1e-10)
    every = build_loss({"metrix": spec}, embedding_dim=4, num_classes=4)  # int k: input only
    assert every(emb, labels, kind="anc_neg", lam=0.6).item() != pytest.approx(expected)
    for bad in ({"pixels": 3}, {"feature": 0}, {"feature": True}, 0):
        with pytest.raises(ConfigError, match="loss.hard_negatives"):
            build_loss({"metrix": {"hard_negatives": bad}}, embedding_dim=4, num_classes=4)

"""Metrix mixing (pairs, levels, lambda) against slow references."""

import math

import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn

from gspdml.errors import ConfigError, TrainingError
from gspdml.losses import build_loss
from gspdml.losses.contrastive import C2Contrastive
from gspdml.losses.metrix_pairs import mixing_triples
from gspdml.models import Embedder
from gspdml.pooling import POOLINGS
from gspdml.pooling.simple import GAP


def _triples_reference(labels, kind, sim=None, k=None, positives="all"):
    rows = []
    n = len(labels)
    for a in range(n):
        negs = [j for j in range(n) if labels[j] != labels[a]]
        if k is not None:
            negs = sorted(sorted(negs, key=lambda j: -float(sim[a, j]))[:k])
        firsts = (
            [a] if kind == "anc_neg" else [p for p in range(n) if p != a and labels[p] == labels[a]]
        )
        if positives == "first":
            firsts = firsts[:1]
        rows += [(a, p, q) for p in firsts for q in negs]
    return rows


@pytest.mark.parametrize("kind", ["pos_neg", "anc_neg"])
@pytest.mark.parametrize("k", [None, 1, 3])
@pytest.mark.parametrize("positives", ["all", "first"])
def test_mixing_triples_equal_loops(kind, k, positives):
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 0, 1, 2, 2, 2, 1, 3])
    sim = torch.randn(8, 8, generator=g)
    got = mixing_triples(labels, kind, sim if k else None, k, positives).tolist()
    assert [tuple(r) for r in got] == _triples_reference(labels.tolist(), kind, sim, k, positives)


def test_first_positive_pairs_by_hand_and_through_the_loss():
    """Eq. 2.8 mixes every positive with every negative; the authors' code only the anchor's
    first positive (``pos[index_pos][0]``). Labels 0 1 0 1 0: anchors 0 and 4 have positives
    {2, 4} and {0, 2}, so ``first`` keeps (0, 2, .) and (4, 0, .) and drops (0, 4, .), (4, 2, .)."""
    labels = torch.tensor([0, 1, 0, 1, 0])
    first = [
        (0, 2, 1),
        (0, 2, 3),
        (1, 3, 0),
        (1, 3, 2),
        (1, 3, 4),
        (2, 0, 1),
        (2, 0, 3),
        (3, 1, 0),
        (3, 1, 2),
        (3, 1, 4),
        (4, 0, 1),
        (4, 0, 3),
    ]
    assert [
        tuple(r) for r in mixing_triples(labels, "pos_neg", positives="first").tolist()
    ] == first
    extra = {(0, 4, 1), (0, 4, 3), (2, 4, 1), (2, 4, 3), (4, 2, 1), (4, 2, 3)}
    assert set(map(tuple, mixing_triples(labels, "pos_neg").tolist())) == set(first) | extra
    assert (
        mixing_triples(labels, "anc_neg", positives="first").tolist()
        == mixing_triples(labels, "anc_neg").tolist()
    )

    g = torch.Generator().manual_seed(5)
    emb = F.normalize(torch.randn(5, 4, generator=g, dtype=torch.float64), dim=1)
    loss = build_loss(
        {
            "metrix": {
                "level": "embedding",
                "positives": "first",
                "loss": {"contrastive": {"neg_margin": 1.4}},
            }
        },
        embedding_dim=4,
        num_classes=2,
    )
    triples = torch.tensor(first)
    mixed = F.normalize(0.3 * emb[triples[:, 1]] + 0.7 * emb[triples[:, 2]], dim=1)
    expected = loss.base.clean(emb, labels) + 0.4 * loss.base.mixed(
        emb, labels, mixed, triples, torch.full((len(first),), 0.3)
    )
    torch.testing.assert_close(loss(emb, labels, kind="pos_neg", lam=0.3), expected)
    every = build_loss(
        {"metrix": {"level": "embedding", "loss": {"contrastive": {"neg_margin": 1.4}}}},
        embedding_dim=4,
        num_classes=2,
    )
    assert not torch.allclose(every(emb, labels, kind="pos_neg", lam=0.3), expected)
    with pytest.raises(ConfigError, match="positives"):
        build_loss({"metrix": {"positives": "last"}}, embedding_dim=4, num_classes=2)


def _balanced(seed=0, classes=3, per_class=3, dim=5):
    g = torch.Generator().manual_seed(seed)
    emb = F.normalize(
        torch.randn(classes * per_class, dim, generator=g, dtype=torch.float64), dim=1
    )
    return emb, torch.arange(classes).repeat_interleave(per_class)


def _c2_parts(emb, labels, neg_margin):
    pos, neg = [], []
    for a in range(len(labels)):
        for j in range(len(labels)):
            if a != j:
                d = math.dist(emb[a].tolist(), emb[j].tolist())
                (pos if labels[a] == labels[j] else neg).append(
                    max(d, 0.0) if labels[a] == labels[j] else max(neg_margin - d, 0.0)
                )
    nz = lambda v: sum(v) / max(1, sum(x > 0 for x in v))  # noqa: E731
    return nz(pos), nz(neg)


@pytest.mark.parametrize("kind,lam", [("pos_neg", 1.0), ("anc_neg", 0.0)])
def test_embedding_level_with_lambda_1_or_0_adds_the_clean_positive_or_negative_part(kind, lam):
    emb, labels = _balanced()
    loss = build_loss(
        {"metrix": {"level": "embedding", "loss": {"contrastive": {"neg_margin": 1.4}}}},
        embedding_dim=5,
        num_classes=3,
    )
    total = loss(emb, labels, kind=kind, lam=lam)
    pos, neg = _c2_parts(emb, labels, 1.4)
    clean = C2Contrastive(0.0, 1.4)(emb, labels)
    assert float(clean) == pytest.approx(pos + neg, rel=1e-9)
    assert float(total) == pytest.approx(
        float(clean) + 0.4 * (pos if lam == 1.0 else neg), rel=1e-9
    )


def _linear_embedder(channels=4, dim=3, seed=0):
    torch.manual_seed(seed)
    head = nn.Conv2d(channels, dim, 1).double()
    return Embedder(nn.Identity(), GAP(dim), head)


def _feature_reference(model, maps, labels, triples, lam, loss, detach_first=False):
    """Eq. 2.4 (feature) by hand: v_j = normalise(GAP(head(lam F_first + (1 - lam) F_second)))."""
    w, b = model.head.weight[:, :, 0, 0], model.head.bias
    embed = lambda f: F.normalize(torch.einsum("dc,chw->dhw", w, f).mean((1, 2)) + b, dim=0)  # noqa: E731
    clean = torch.stack([embed(maps[i]) for i in range(len(maps))])
    mixed = []
    for _, p, n in triples:
        first = maps[p].detach() if detach_first else maps[p]
        mixed.append(embed(lam * first + (1 - lam) * maps[n]))
    return loss.base.mixed(
        clean, labels, torch.stack(mixed), torch.tensor(triples), torch.tensor([lam] * len(triples))
    )


@pytest.mark.parametrize(
    "family",
    [{"contrastive": {"neg_margin": 1.5}}, {"ms": {"alpha": 2.0, "beta": 10.0, "base": 0.3}}],
)
def test_feature_level_mixes_backbone_maps_and_gradients_reach_both_sources(family):
    model = _linear_embedder()
    labels = torch.tensor([0, 0, 1, 2])
    maps = torch.randn(4, 4, 3, 3, dtype=torch.float64, requires_grad=True)
    loss = build_loss(
        {"metrix": {"level": "feature", "loss": family, "mix_weight": 1.0}},
        embedding_dim=3,
        num_classes=3,
    )
    lam = 0.3
    total = loss.training_objective(model, maps, labels, kind="pos_neg", lam=lam)
    clean = loss.base.clean(model(maps).embedding, labels)
    (grad,) = torch.autograd.grad(total - clean, maps)

    triples = [tuple(t) for t in mixing_triples(labels, "pos_neg").tolist()]
    assert triples == [(0, 1, 2), (0, 1, 3), (1, 0, 2), (1, 0, 3)]
    expected = _feature_reference(model, maps, labels, triples, lam, loss)
    # a float64 model keeps float64 through the embedder and the objective, as the reference
    assert total.dtype == torch.float64
    torch.testing.assert_close(total - clean, expected)
    (expected_grad,) = torch.autograd.grad(expected, maps)
    torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-6)
    assert grad[2].abs().sum() > 0 and grad[3].abs().sum() > 0  # negatives: only second sources
    (no_first,) = torch.autograd.grad(
        _feature_reference(model, maps, labels, triples, lam, loss, detach_first=True), maps
    )
    assert not torch.allclose(grad, no_first)  # the positive (first) source gets its own gradient


@pytest.mark.parametrize("autocast", [False, True])
def test_feature_level_objective_of_a_float32_model_is_float32(autocast):
    """float32 models (also under bf16 autocast) compute the mixed loss in float32; only a
    float64 model keeps float64."""
    model = _linear_embedder().float()
    labels = torch.tensor([0, 0, 1, 2])
    maps = torch.randn(4, 4, 3, 3)
    loss = build_loss(
        {"metrix": {"level": "feature", "loss": {"contrastive": {"neg_margin": 1.5}}}},
        embedding_dim=3,
        num_classes=3,
    )
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        total = loss.training_objective(model, maps, labels, kind="pos_neg", lam=0.3)
    assert total.dtype == torch.float32 and torch.isfinite(total)


def test_input_level_with_identity_backbone_equals_feature_level_and_uses_hard_negatives():
    model = _linear_embedder(seed=1)
    labels = torch.tensor([0, 0, 1, 1, 2, 3])
    images = torch.randn(6, 4, 3, 3, dtype=torch.float64)
    spec = {"loss": {"contrastive": {"neg_margin": 1.5}}, "pairs": "anc_neg"}
    feature = build_loss({"metrix": {**spec, "level": "feature"}}, embedding_dim=3, num_classes=4)
    all_negs = build_loss(
        {"metrix": {**spec, "level": "input", "hard_negatives": 6}}, embedding_dim=3, num_classes=4
    )
    hard = build_loss(
        {"metrix": {**spec, "level": "input", "hard_negatives": 1}}, embedding_dim=3, num_classes=4
    )
    torch.testing.assert_close(
        all_negs.training_objective(model, images, labels, lam=0.7),
        feature.training_objective(model, images, labels, lam=0.7),
    )
    emb = model(images).embedding
    triples = mixing_triples(labels, "anc_neg", emb @ emb.T, 1)
    assert len(triples) == 6
    mixed = model(0.7 * images[triples[:, 1]] + 0.3 * images[triples[:, 2]]).embedding
    expected = hard.base.clean(emb, labels) + 0.4 * hard.base.mixed(
        emb, labels, mixed, triples, torch.full((6,), 0.7)
    )
    torch.testing.assert_close(hard.training_objective(model, images, labels, lam=0.7), expected)


def test_random_pairs_and_beta_lambda():
    emb, labels = _balanced(seed=3)
    loss = build_loss(
        {"metrix": {"level": "embedding", "lambda_per_pair": True}}, embedding_dim=5, num_classes=3
    )
    torch.manual_seed(0)
    draws = loss._draw_lambda(4000, emb, "pos_neg")
    assert stats.kstest(draws.numpy(), "beta", args=(2.0, 2.0)).pvalue > 1e-3
    assert stats.kstest(draws.numpy(), "uniform").pvalue < 1e-6
    seen = set()
    for _ in range(20):
        seen.add(round(float(loss(emb, labels, lam=0.5)), 12))
    assert len(seen) == 2  # the pair type (pos-neg or anc-neg) is drawn per iteration


def test_levels_that_need_the_model_refuse_plain_forward_and_bad_options_are_named():
    emb, labels = _balanced()
    with pytest.raises(TrainingError, match="training_objective"):
        build_loss("metrix", embedding_dim=5, num_classes=3)(emb, labels)
    with pytest.raises(ConfigError, match="level"):
        build_loss({"metrix": {"level": "pixels"}}, embedding_dim=5, num_classes=3)
    with pytest.raises(ConfigError, match=r"loss\.loss: must be a loss with label weights"):
        build_loss({"metrix": {"loss": "triplet"}}, embedding_dim=5, num_classes=3)


def test_proxy_anchor_metrix_mixes_each_pair_of_examples_once():
    emb, labels = _balanced(seed=4)
    emb.requires_grad_(True)
    loss = build_loss(
        {"metrix": {"level": "embedding", "loss": "proxy_anchor", "pairs": "pos_neg"}},
        embedding_dim=5,
        num_classes=3,
    ).double()
    assert loss.lr_multiplier == 100.0
    total = loss(emb, labels, lam=0.25)
    pairs = sorted({(p, n) for _, p, n in _triples_reference(labels.tolist(), "pos_neg")})
    triples = torch.tensor([(p, p, n) for p, n in pairs])
    mixed = F.normalize(0.25 * emb[triples[:, 1]] + 0.75 * emb[triples[:, 2]], dim=1)
    expected = loss.base.clean(emb, labels) + 0.4 * loss.base.mixed(
        emb, labels, mixed, triples, torch.full((len(pairs),), 0.25)
    )
    torch.testing.assert_close(total, expected)
    total.backward()
    assert loss.base.proxies.grad.abs().sum() > 0 and emb.grad.abs().sum() > 0


def test_chunked_feature_mixup_gives_the_same_loss_and_gradients():
    """``mix_chunk`` embeds the mixed maps a few at a time under checkpointing: same value and
    same gradients (on the maps and on the embedding layer) as all at once, on GAP+GMP."""
    torch.manual_seed(0)
    model = Embedder(
        nn.Identity(), POOLINGS.build("gap_gmp", in_channels=4), projection=nn.Linear(4, 3).double()
    )
    labels = torch.tensor([0, 0, 1, 1, 2, 3, 3])
    maps = torch.randn(7, 4, 3, 3, dtype=torch.float64, requires_grad=True)
    spec = {"loss": {"contrastive": {"neg_margin": 1.5}}, "level": "feature", "mix_weight": 1.0}
    results = []
    for chunk in (None, 3):
        loss = build_loss({"metrix": {**spec, "mix_chunk": chunk}}, embedding_dim=3, num_classes=4)
        total = loss.training_objective(model, maps, labels, kind="pos_neg", lam=0.3)
        results.append((total, *torch.autograd.grad(total, (maps, model.projection.weight))))
    assert len(mixing_triples(labels, "pos_neg")) > 3  # more than one chunk
    for whole, chunked in zip(*results):
        torch.testing.assert_close(chunked, whole)
    with pytest.raises(ConfigError, match="mix_chunk"):
        build_loss(
            {"metrix": {**spec, "level": "embedding", "mix_chunk": 8}},
            embedding_dim=3,
            num_classes=4,
        )

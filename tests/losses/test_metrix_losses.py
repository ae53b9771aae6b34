"""Label-weighted (mixed) losses of Metrix against slow loops and pytorch-metric-learning."""

import math

import pytest
import torch
from pytorch_metric_learning import losses as pml
from pytorch_metric_learning import miners as pml_miners

from gspdml.losses import build_loss
from gspdml.losses.contrastive import C2Contrastive


def _metrix_base(spec, embedding_dim=6, num_classes=3):
    """The base loss of Metrix, with the Metrix recipe's defaults (what ``MIXED_LOSSES`` built)."""
    metrix = build_loss(
        {"metrix": {"loss": spec, "level": "embedding"}},
        embedding_dim=embedding_dim,
        num_classes=num_classes,
    )
    return metrix.base


def _unit(x):
    return x / x.norm(dim=-1, keepdim=True)


def _batch(seed=0, n=10, dim=6, classes=3):
    g = torch.Generator().manual_seed(seed)
    return _unit(torch.randn(n, dim, generator=g, dtype=torch.float64)), torch.randint(
        classes, (n,), generator=g
    )


def _mixed_setup(seed=1, m=7):
    emb, labels = _batch(seed)
    g = torch.Generator().manual_seed(seed + 100)
    mixed = _unit(torch.randn(m, emb.shape[1], generator=g, dtype=torch.float64))
    triples = torch.stack([torch.randint(len(labels), (m,), generator=g) for _ in range(3)], 1)
    lam = torch.rand(m, generator=g, dtype=torch.float64)
    return emb, labels, mixed, triples, lam


def test_clean_contrastive_is_c2_and_pml_contrastive():
    emb, labels = _batch()
    loss = _metrix_base({"contrastive": {"pos_margin": 0.2, "neg_margin": 1.1}})
    ours = loss.clean(emb, labels)
    torch.testing.assert_close(ours, C2Contrastive(0.2, 1.1)(emb, labels))
    torch.testing.assert_close(
        ours, pml.ContrastiveLoss(pos_margin=0.2, neg_margin=1.1)(emb, labels)
    )


def test_clean_ms_is_pml_multi_similarity():
    emb, labels = _batch(seed=2)
    ours = _metrix_base({"ms": {"alpha": 2.0, "beta": 40.0, "base": 0.5, "epsilon": None}}).clean(
        emb, labels
    )
    torch.testing.assert_close(
        ours, pml.MultiSimilarityLoss(alpha=2.0, beta=40.0, base=0.5)(emb, labels)
    )


@pytest.mark.parametrize("seed", [2, 3, 4])
def test_clean_ms_with_the_metrix_miner_is_pml_loss_with_its_miner(seed):
    """The Metrix code: MultiSimilarityLoss(17.97, 75.66, 0.77) on MultiSimilarityMiner(0.39) pairs."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(16) % 4
    centres = torch.randn(
        4, 8, generator=g, dtype=torch.float64
    )  # clustered, so the miner drops easy pairs
    emb = _unit(centres[labels] + 0.7 * torch.randn(16, 8, generator=g, dtype=torch.float64))
    loss = _metrix_base("ms")
    assert (loss.alpha, loss.beta, loss.base, loss.epsilon) == (17.97, 75.66, 0.77, 0.39)
    miner = pml_miners.MultiSimilarityMiner(epsilon=0.39)
    expected = pml.MultiSimilarityLoss(alpha=17.97, beta=75.66, base=0.77)(
        emb, labels, miner(emb, labels)
    )
    torch.testing.assert_close(loss.clean(emb, labels), expected)
    unmined = _metrix_base({"ms": {"epsilon": None}}).clean(emb, labels)
    assert abs(float(unmined) - float(expected)) > 1e-6


def test_mixed_contrastive_equals_loop():
    emb, labels, mixed, triples, lam = _mixed_setup()
    loss = _metrix_base({"contrastive": {"pos_margin": 0.1, "neg_margin": 1.3}})
    pos, neg = [], []
    for j, (a, _, _) in enumerate(triples.tolist()):
        d = math.dist(emb[a].tolist(), mixed[j].tolist())
        pos.append(float(lam[j]) * max(d - 0.1, 0.0))
        neg.append((1 - float(lam[j])) * max(1.3 - d, 0.0))
    nz = lambda v: sum(v) / max(1, sum(x > 0 for x in v))  # noqa: E731
    assert float(loss.mixed(emb, labels, mixed, triples, lam)) == pytest.approx(
        nz(pos) + nz(neg), rel=1e-10
    )
    anchor_mean = _metrix_base(
        {"contrastive": {"pos_margin": 0.1, "neg_margin": 1.3, "reduction": "anchor_mean"}}
    )
    expected = (sum(pos) + sum(neg)) / len(set(triples[:, 0].tolist()))
    assert float(anchor_mean.mixed(emb, labels, mixed, triples, lam)) == pytest.approx(
        expected, rel=1e-10
    )


def test_mixed_similarity_contrastive_equals_eq_2_12():
    emb, labels, mixed, triples, lam = _mixed_setup(seed=3)
    loss = _metrix_base({"contrastive_similarity": {"margin": 0.1}})
    per_anchor = {}
    for j, (a, _, _) in enumerate(triples.tolist()):
        s = float(emb[a] @ mixed[j])
        per_anchor[a] = (
            per_anchor.get(a, 0.0) - float(lam[j]) * s + (1 - float(lam[j])) * max(s - 0.1, 0.0)
        )
    expected = sum(per_anchor.values()) / len(per_anchor)
    assert float(loss.mixed(emb, labels, mixed, triples, lam)) == pytest.approx(expected, rel=1e-10)


def test_mixed_ms_equals_eq_2_13():
    emb, labels, mixed, triples, lam = _mixed_setup(seed=4)
    alpha, beta, base = 18.0, 75.0, 0.77
    loss = _metrix_base({"ms": {"alpha": alpha, "beta": beta, "base": base}})
    pos, neg = {}, {}
    for j, (a, _, _) in enumerate(triples.tolist()):
        s, lj = float(emb[a] @ mixed[j]), float(lam[j])
        pos[a] = pos.get(a, 0.0) + lj * math.exp(-alpha * (s - base))
        neg[a] = neg.get(a, 0.0) + (1 - lj) * math.exp(beta * (s - base))
    expected = sum(math.log1p(pos[a]) / alpha + math.log1p(neg[a]) / beta for a in pos) / len(pos)
    assert float(loss.mixed(emb, labels, mixed, triples, lam)) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("name", ["contrastive", "contrastive_similarity", "ms"])
@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_mixed_example_with_lambda_0_or_1_is_the_clean_negative_or_positive(name, lam):
    """A pos-neg mix with lambda = 1 is the positive, with lambda = 0 the negative (Eq. 2.11)."""
    emb, labels = _batch(seed=5)
    options = {
        "contrastive": {"neg_margin": 1.2},
        "ms": {"alpha": 18.0, "beta": 75.0, "base": 0.77},
    }.get(name, {})
    loss = _metrix_base({"name": name, **options})
    a = 0
    p = int(torch.nonzero((labels == labels[a]) & (torch.arange(len(labels)) != a))[0])
    n = int(torch.nonzero(labels != labels[a])[0])
    mixed = (lam * emb[p] + (1 - lam) * emb[n])[None]
    value = loss.mixed(
        emb, labels, mixed, torch.tensor([[a, p, n]]), torch.tensor([lam], dtype=torch.float64)
    )
    source = p if lam == 1.0 else n
    # the clean loss restricted to the single pair (a, source), with its binary label
    clean = loss.labelled(
        emb,
        emb,
        torch.tensor([a]),
        torch.tensor([source]),
        torch.tensor([lam], dtype=torch.float64),
    )
    torch.testing.assert_close(value, clean)
    s, d = float(emb[a] @ emb[source]), math.dist(emb[a].tolist(), emb[source].tolist())
    hand = {
        ("contrastive", 1.0): d,
        ("contrastive", 0.0): max(1.2 - d, 0.0),
        ("contrastive_similarity", 1.0): -s,
        ("contrastive_similarity", 0.0): max(s - 0.5, 0.0),
        ("ms", 1.0): math.log1p(math.exp(-18 * (s - 0.77))) / 18,
        ("ms", 0.0): math.log1p(math.exp(75 * (s - 0.77))) / 75,
    }[(name, lam)]
    assert float(value) == pytest.approx(hand, rel=1e-9, abs=1e-12)


def test_ms_is_stable_for_large_scales():
    emb, labels, mixed, triples, lam = _mixed_setup(seed=6)
    loss = _metrix_base({"ms": {"alpha": 400.0, "beta": 900.0, "base": -0.9}})
    value = loss.mixed(emb.float(), labels, mixed.float(), triples, lam.float())
    assert torch.isfinite(value)


def _proxy_anchor(variant, classes=3, dim=6, seed=7):
    loss = _metrix_base(
        {"proxy_anchor": {"variant": variant}}, embedding_dim=dim, num_classes=classes
    ).double()
    g = torch.Generator().manual_seed(seed)
    loss.proxies.data.copy_(torch.randn(classes, dim, generator=g, dtype=torch.float64))
    return loss


def _proxy_anchor_loop(loss, candidates, soft_labels, negative=None):
    """Per proxy q: positive and negative log-sum terms with soft labels (negative weights
    ``1 - y`` unless given), then the variant's means."""
    negative = 1 - soft_labels if negative is None else negative
    alpha, delta = loss.alpha, loss.delta
    proxies = _unit(loss.proxies.detach())
    pos, neg = [], []
    for q in range(len(proxies)):
        sims = [float(proxies[q] @ v) for v in candidates]
        ys = [float(y) for y in soft_labels[q]]
        pos.append(math.log1p(sum(y * math.exp(-alpha * (s - delta)) for s, y in zip(sims, ys))))
        shift = delta if loss.variant == "original" else -delta
        ns = [float(w) for w in negative[q]]
        neg.append(math.log1p(sum(w * math.exp(alpha * (s + shift)) for s, w in zip(sims, ns))))
    if loss.variant == "original":
        with_pos = sum(1 for q in range(len(proxies)) if float(soft_labels[q].sum()) > 0)
        return sum(pos) / with_pos + sum(neg) / len(proxies)
    return sum(p + n for p, n in zip(pos, neg)) / (alpha * len(proxies))


def test_clean_proxy_anchor_is_pml_proxy_anchor():
    emb, labels = _batch(seed=8, classes=3)
    loss = _proxy_anchor("original")
    reference = pml.ProxyAnchorLoss(num_classes=3, embedding_size=6, margin=0.1, alpha=32).double()
    reference.proxies.data.copy_(loss.proxies.data)
    torch.testing.assert_close(loss.clean(emb, labels), reference(emb, labels))


@pytest.mark.parametrize("variant", ["original", "thesis_generic"])
def test_mixed_proxy_anchor_equals_loop_with_soft_labels(variant):
    emb, labels, mixed, triples, lam = _mixed_setup(seed=9)
    labels = labels % 3
    loss = _proxy_anchor(variant)
    soft = torch.zeros(3, len(triples), dtype=torch.float64)
    negative = torch.zeros(3, len(triples), dtype=torch.float64)
    for j, (_, f, s) in enumerate(triples.tolist()):
        soft[labels[f], j] += lam[j]
        soft[labels[s], j] += 1 - lam[j]
    for j, (_, f, s) in enumerate(triples.tolist()):
        for q in {
            int(labels[f]),
            int(labels[s]),
        }:  # Eq. 2.8: only the parents' proxies label the mixture
            negative[q, j] = 1 - soft[q, j]
    expected = _proxy_anchor_loop(loss, mixed, soft, negative)
    assert float(loss.mixed(emb, labels, mixed, triples, lam).detach()) == pytest.approx(
        expected, rel=1e-9
    )
    clean_expected = _proxy_anchor_loop(loss, emb, torch.nn.functional.one_hot(labels, 3).T)
    assert float(loss.clean(emb, labels).detach()) == pytest.approx(clean_expected, rel=1e-9)


@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_mixed_proxy_anchor_with_lambda_0_or_1_is_the_clean_loss_of_one_source(lam):
    """With two classes both proxies are the parents' proxies, so the mixture at lambda = 0 or 1
    is exactly one clean example."""
    emb, labels = _batch(seed=10, classes=2)
    loss = _proxy_anchor("original", classes=2)
    p = 0
    n = int(torch.nonzero(labels != labels[p])[0])
    mixed = (lam * emb[p] + (1 - lam) * emb[n])[None]
    value = loss.mixed(
        emb, labels, mixed, torch.tensor([[p, p, n]]), torch.tensor([lam], dtype=torch.float64)
    )
    source = p if lam == 1.0 else n
    torch.testing.assert_close(
        value, loss.clean(emb[source : source + 1], labels[source : source + 1])
    )


def test_mixed_proxy_anchor_ignores_proxies_of_other_classes():
    """No negative-negative mixing: the proxy of a third class gets no gradient from a mixture of
    classes 0 and 1, while it does from the clean loss of the same two examples."""
    loss = _proxy_anchor("original")
    emb = _unit(torch.randn(2, 6, generator=torch.Generator().manual_seed(11), dtype=torch.float64))
    labels = torch.tensor([0, 1])
    mixed = _unit(0.3 * emb[0] + 0.7 * emb[1])[None]
    loss.mixed(
        emb, labels, mixed, torch.tensor([[0, 0, 1]]), torch.tensor([0.3], dtype=torch.float64)
    ).backward()
    assert (
        float(loss.proxies.grad[2].abs().sum()) == 0.0
        and float(loss.proxies.grad[:2].abs().sum()) > 0
    )
    loss.proxies.grad = None
    loss.clean(emb, labels).backward()
    assert float(loss.proxies.grad[2].abs().sum()) > 0

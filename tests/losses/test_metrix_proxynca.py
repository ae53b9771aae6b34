"""ProxyNCA / ProxyNCA++ + Metrix (Psomas thesis Table 2.3) against slow loops over proxies."""

import math

import pytest
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.losses import build_loss


def _metrix(base, pairs="random", **options):
    return build_loss(
        {"metrix": {"loss": {base: options}, "level": "embedding", "pairs": pairs}},
        embedding_dim=5,
        num_classes=3,
    ).double()


def _logits_loop(loss, v):
    """``z_q = -|v/|v| - p_q/|p_q||^2 / T`` for every proxy, in plain Python."""
    vn = [x / math.sqrt(sum(y * y for y in v)) for x in v]
    out = []
    for p in loss.proxies.detach().tolist():
        pn = [x / math.sqrt(sum(y * y for y in p)) for x in p]
        out.append(-sum((a - b) ** 2 for a, b in zip(vn, pn)) / loss.temperature)
    return out


def _clean_loop(loss, z, c):
    """ProxyNCA++ Eq. 6 (softmax over all proxies) or ProxyNCA Eq. 3 (positive left out)."""
    others = [math.exp(x) for q, x in enumerate(z) if loss.assignment_probability or q != c]
    return math.log(sum(others)) - z[c]


def _mixed_loop(loss, mixed, pairs, labels, lam):
    total = 0.0
    for v, (f, s) in zip(mixed.tolist(), pairs):
        z = _logits_loop(loss, v)
        c, d = int(labels[f]), int(labels[s])
        if loss.mixed_targets == "interpolated":
            total += lam * _clean_loop(loss, z, c) + (1 - lam) * _clean_loop(loss, z, d)
            continue
        y = [lam * (q == c) + (1 - lam) * (q == d) for q in range(len(z))]
        w = [1.0 if loss.assignment_probability else 1 - yq for yq in y]
        positive = sum(yq * math.exp(x) for yq, x in zip(y, z))
        total += math.log(sum(wq * math.exp(x) for wq, x in zip(w, z))) - math.log(positive)
    return total / len(pairs)


def _pairs_loop(labels, kind):
    """The distinct (first, second) example pairs of the mixing triples of every anchor."""
    n, out = len(labels), set()
    for a in range(n):
        pos = [p for p in range(n) if p != a and labels[p] == labels[a]]
        neg = [q for q in range(n) if labels[q] != labels[a]]
        firsts = pos if kind == "pos_neg" else [a]
        out |= {(f, s) for f in firsts for s in neg}
    return sorted(out)


@pytest.mark.parametrize("base", ["proxynca_pp", "proxy_nca"])
@pytest.mark.parametrize("targets", ["generic", "interpolated"])
@pytest.mark.parametrize("kind", ["pos_neg", "anc_neg"])
def test_proxynca_metrix_equals_loops(base, targets, kind):
    g = torch.Generator().manual_seed(3)
    labels = torch.tensor([0, 1, 0, 2, 1, 2, 2])
    emb = F.normalize(torch.randn(7, 5, generator=g, dtype=torch.float64), dim=1)
    loss = _metrix(base, mixed_targets=targets)
    lam = 0.3
    pairs = _pairs_loop(labels.tolist(), kind)
    mixed = F.normalize(torch.stack([lam * emb[f] + (1 - lam) * emb[s] for f, s in pairs]), dim=1)
    clean = sum(
        _clean_loop(loss.base, _logits_loop(loss.base, e), int(c))
        for e, c in zip(emb.tolist(), labels)
    ) / len(labels)
    expected = clean + 0.4 * _mixed_loop(loss.base, mixed, pairs, labels, lam)
    value = loss(emb, labels, kind=kind, lam=lam).item()
    assert value == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("targets", ["generic", "interpolated"])
@pytest.mark.parametrize("lam", [0.0, 1.0])
def test_mixed_proxynca_at_lambda_0_or_1_is_the_clean_loss_of_that_parent(targets, lam):
    g = torch.Generator().manual_seed(4)
    emb = F.normalize(torch.randn(2, 5, generator=g, dtype=torch.float64), dim=1)
    labels = torch.tensor([0, 2])
    base = _metrix("proxynca_pp", mixed_targets=targets).base
    source = 0 if lam == 1.0 else 1
    mixed = emb[source : source + 1]
    value = base.mixed(emb, labels, mixed, torch.tensor([[0, 0, 1]]), torch.tensor([lam]))
    torch.testing.assert_close(value, base(mixed, labels[source : source + 1]))


def test_generic_and_interpolated_targets_differ_and_both_train_proxies_and_embeddings():
    g = torch.Generator().manual_seed(5)
    emb = F.normalize(torch.randn(6, 5, generator=g, dtype=torch.float64), dim=1)
    emb.requires_grad_(True)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    values = []
    for targets in ("generic", "interpolated"):
        torch.manual_seed(0)
        loss = _metrix("proxynca_pp", mixed_targets=targets)
        total = loss(emb, labels, kind="pos_neg", lam=0.5)
        grads = torch.autograd.grad(total, (emb, loss.base.proxies))
        assert all(float(x.abs().sum()) > 0 for x in grads)
        values.append(total.item())
    # -log(mean of p) < mean of -log p (Jensen) for two different probabilities
    assert values[0] < values[1]
    with pytest.raises(ConfigError, match="mixed_targets"):
        _metrix("proxynca_pp", mixed_targets="soft")

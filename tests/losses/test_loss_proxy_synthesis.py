"""Proxy Synthesis (Gu et al., AAAI 2021) around Proxy Anchor and ProxyNCA++, against loops."""

import math

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.losses import build_loss


def _unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def _mix(lam, a, b):
    return _unit([lam * x + (1 - lam) * y for x, y in zip(a, b)])


def _dot(a, b):
    return sum(x * y for x, y in zip(a, b))


def _proxy_anchor_loop(emb, labels, proxies, alpha=32.0, delta=0.1):
    """Kim et al. 2020, Eq. 4 over the given embeddings and proxies (proxy q is class q)."""
    pos, neg, present = 0.0, 0.0, 0
    for q, p in enumerate(proxies):
        own = [math.exp(-alpha * (_dot(e, p) - delta)) for e, y in zip(emb, labels) if y == q]
        other = [math.exp(alpha * (_dot(e, p) + delta)) for e, y in zip(emb, labels) if y != q]
        if own:
            pos, present = pos + math.log(1 + sum(own)), present + 1
        neg += math.log(1 + sum(other))
    return pos / present + neg / len(proxies)


def _pnca_loop(emb, labels, proxies, temperature):
    total = 0.0
    for e, y in zip(emb, labels):
        z = [-(2 - 2 * _dot(e, p)) / temperature for p in proxies]
        total += math.log(sum(math.exp(x) for x in z)) - z[y]
    return total / len(emb)


def _synthesised(emb, labels, proxies, lam, mu, classes):
    """Enlarged embeddings, labels and proxies: example i mixed with i - 1 (cyclically)."""
    count = int(len(emb) * mu)
    e, y, p = list(emb), list(labels), list(proxies)
    for i in range(count):
        j = (i - 1) % len(emb)
        e.append(_mix(lam, emb[i], emb[j]))
        p.append(_mix(lam, proxies[labels[i]], proxies[labels[j]]))
        y.append(classes + i)
    return e, y, p


@pytest.mark.parametrize("base", ["proxy_anchor", "proxynca_pp"])
@pytest.mark.parametrize("mu", [1.0, 0.5, 0.0])
def test_proxy_synthesis_equals_the_loss_over_synthetic_classes(base, mu):
    g = torch.Generator().manual_seed(0)
    labels = torch.tensor([0, 1, 2, 0, 3, 1])
    emb = torch.randn(6, 5, generator=g, dtype=torch.float64)
    loss = build_loss(
        {"proxy_synthesis": {"loss": base, "mu": mu}}, embedding_dim=5, num_classes=4
    ).double()
    proxies = [_unit(p) for p in loss.base.proxies.detach().tolist()]
    e = [_unit(v) for v in emb.tolist()]
    e, y, p = _synthesised(e, labels.tolist(), proxies, 0.3, mu, 4)
    if base == "proxy_anchor":
        expected = _proxy_anchor_loop(e, y, p)
    else:
        expected = _pnca_loop(e, y, p, loss.base.temperature)
    assert loss(emb, labels, lam=0.3).item() == pytest.approx(expected, rel=1e-10)
    if mu == 0.0:
        torch.testing.assert_close(loss(emb, labels), loss.base(emb, labels))


def test_synthetic_proxies_train_the_real_ones_and_lambda_is_drawn():
    g = torch.Generator().manual_seed(1)
    labels = torch.tensor([0, 1])
    emb = torch.randn(2, 5, generator=g, dtype=torch.float64, requires_grad=True)
    loss = build_loss("proxy_synthesis", embedding_dim=5, num_classes=3).double()
    assert loss.lr_multiplier == 100.0
    total = loss(emb, labels, lam=0.5)
    grad = torch.autograd.grad(total, loss.base.proxies)[0]
    assert float(grad[2].abs().sum()) > 0  # class 2 is absent: only negatives reach its proxy
    torch.manual_seed(0)
    values = {round(loss(emb, labels).item(), 12) for _ in range(5)}
    assert len(values) == 5


def test_bad_options_are_named():
    for options, field in (
        ({"loss": "contrastive"}, "loss.loss"),
        ({"mu": 1.5}, "loss.mu"),
        ({"alpha": 0.0}, "loss.alpha"),
    ):
        with pytest.raises(ConfigError, match=field):
            build_loss({"proxy_synthesis": options}, embedding_dim=5, num_classes=3)


def test_each_synthetic_class_mixes_two_classes():
    """Neighbours of one class (balanced batches) are skipped: example i is mixed with the nearest
    preceding example of another class, cyclically; a one-class batch synthesises nothing."""
    from gspdml.losses.proxy_synthesis import _previous_of_another_class

    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    assert _previous_of_another_class(labels).tolist() == [5, 5, 1, 1, 1, 4]
    assert _previous_of_another_class(torch.tensor([3, 1, 2])).tolist() == [2, 0, 1]
    loss = build_loss("proxy_synthesis", embedding_dim=5, num_classes=3).double()
    emb = torch.randn(3, 5, dtype=torch.float64)
    one_class = torch.tensor([1, 1, 1])
    torch.testing.assert_close(loss(emb, one_class, lam=0.3), loss.base(emb, one_class))

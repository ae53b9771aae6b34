"""CCP loss value against slow reference loops over (proxy, sample) pairs."""

import math

import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES, build_loss
from gspdml.ops.normalize import clip_normalize


def _unit(x):
    return x / x.norm(dim=1, keepdim=True)


def _setup(k=3, classes=4, dim=5, batch=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    emb = _unit(torch.randn(batch, dim, generator=g, dtype=torch.float64))
    labels = torch.randint(classes, (batch,), generator=g)
    proxies = torch.randn(classes * k, dim, generator=g, dtype=torch.float64)
    return emb, labels, proxies


def _c2_reference(anchors, anchor_labels, refs, ref_labels, m_pos, m_neg):
    pos, neg = [], []
    for i in range(len(anchors)):
        for j in range(len(refs)):
            d = math.dist(_unit(anchors[i : i + 1])[0].tolist(), _unit(refs[j : j + 1])[0].tolist())
            if anchor_labels[i] == ref_labels[j]:
                pos.append(max(d - m_pos, 0.0))
            else:
                neg.append(max(m_neg - d, 0.0))
    nz = lambda v: sum(v) / max(1, sum(1 for x in v if x > 0))  # noqa: E731
    return nz(pos) + nz(neg)


def _c1_reference(anchors, anchor_labels, refs, ref_labels, margin, skip_self=False):
    total = 0.0
    for i in range(len(anchors)):
        for j in range(len(refs)):
            if skip_self and i == j:
                continue
            s = float(_unit(anchors[i : i + 1])[0] @ _unit(refs[j : j + 1])[0])
            total += (1 - s) if anchor_labels[i] == ref_labels[j] else max(s - margin, 0.0)
    return total / len(anchors)


def test_proxy_as_anchor_c2_equals_loop():
    emb, labels, proxies = _setup()
    loss = build_loss(
        {
            "ccp": {
                "base": {"c2": {"pos_margin": 0.1, "neg_margin": 0.9}},
                "proxies_per_class": 3,
                "normalization": "l2",
            }
        },
        embedding_dim=5,
        num_classes=4,
    ).double()
    loss.proxies.data.copy_(proxies)
    proxy_labels = [c for _ in range(3) for c in range(4)]  # k-major layout
    expected = _c2_reference(proxies, proxy_labels, emb, labels.tolist(), 0.1, 0.9)
    assert float(loss(emb, labels).detach()) == pytest.approx(expected, rel=1e-9)


def test_samples_as_anchor_c1_with_in_batch_term_equals_loop():
    emb, labels, proxies = _setup(k=2, seed=1)
    spec = {
        "ccp": {
            "base": {"c1": {"margin": 0.2}},
            "proxies_per_class": 2,
            "pool_size": 2,
            "proxy_as_anchor": False,
            "proxy_weight": 0.7,
            "batch_weight": 0.1,
            "normalization": "l2",
        }
    }
    loss = build_loss(spec, embedding_dim=5, num_classes=4).double()
    loss.proxies.data.copy_(proxies)
    proxy_labels = [c for _ in range(2) for c in range(4)]
    expected = 0.7 * _c1_reference(
        emb, labels.tolist(), proxies, proxy_labels, 0.2
    ) + 0.1 * _c1_reference(emb, labels.tolist(), emb, labels.tolist(), 0.2, skip_self=True)
    assert float(loss(emb, labels).detach()) == pytest.approx(expected, rel=1e-9)


def test_gradients_reach_proxies_and_embeddings():
    emb, labels, proxies = _setup()
    emb.requires_grad_(True)
    loss = build_loss(
        {"ccp": {"base": {"c2": {"neg_margin": 1.5}}, "proxies_per_class": 3}},
        embedding_dim=5,
        num_classes=4,
    ).double()
    loss.proxies.data.copy_(proxies)
    loss(emb, labels).backward()
    assert loss.proxies.grad.abs().sum() > 0 and emb.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "field,value", [("pool_size", 1), ("snapshot", "worst"), ("init", "zeros"), ("patience", 0)]
)
def test_bad_options_name_the_field(field, value):
    with pytest.raises(ConfigError, match=field):
        build_loss(
            {"ccp": {"base": "c2", "proxies_per_class": 2, field: value}},
            embedding_dim=3,
            num_classes=2,
        )


@pytest.mark.parametrize("name", [n for n in ("c1", "c2", "ms", "triplet") if n in LOSSES])
@pytest.mark.parametrize("proxy_as_anchor", [True, False])
def test_every_registered_pair_loss_can_be_wrapped(name, proxy_as_anchor):
    emb, labels, proxies = _setup(seed=2)
    emb.requires_grad_(True)
    loss = build_loss(
        {"ccp": {"base": name, "proxies_per_class": 3, "proxy_as_anchor": proxy_as_anchor}},
        embedding_dim=5,
        num_classes=4,
    ).double()
    loss.proxies.data.copy_(proxies)
    value = loss(emb, labels)
    clipped = clip_normalize(loss.proxies)
    if proxy_as_anchor:
        expected = loss.base(clipped, loss.proxy_labels, reference=emb, reference_labels=labels)
    else:
        expected = loss.base(emb, labels, reference=clipped, reference_labels=loss.proxy_labels)
    torch.testing.assert_close(value, expected)
    value.backward()
    assert torch.isfinite(loss.proxies.grad).all() and torch.isfinite(emb.grad).all()


def test_clip_normalisation_by_hand():
    """One class, one proxy of norm 2 (clipped to norm 1) and two samples of norms 0.5 and 3 along
    other axes: clipped, the samples are (0, 0.5) and (0, 0, 1); the proxy (1, 0, 0). C2 with
    margins (0, 0) sums the positive distances: sqrt(1 + 0.25) and sqrt(2), averaged over the two
    non-zero terms. With L2 normalisation both distances would be sqrt(2)."""
    loss = build_loss(
        {
            "ccp": {
                "base": {"c2": {"pos_margin": 0.0, "neg_margin": 0.0}},
                "proxies_per_class": 1,
                "pool_size": 1,
            }
        },
        embedding_dim=3,
        num_classes=1,
    ).double()
    loss.proxies.data.copy_(torch.tensor([[2.0, 0.0, 0.0]], dtype=torch.float64))
    emb = torch.tensor([[0.0, 0.5, 0.0], [0.0, 0.0, 3.0]], dtype=torch.float64)
    labels = torch.tensor([0, 0])
    expected = (math.sqrt(1.25) + math.sqrt(2.0)) / 2
    assert loss(emb, labels).item() == pytest.approx(expected, rel=1e-9)
    loss_l2 = build_loss(
        {
            "ccp": {
                "base": {"c2": {"pos_margin": 0.0, "neg_margin": 0.0}},
                "proxies_per_class": 1,
                "pool_size": 1,
                "normalization": "l2",
            }
        },
        embedding_dim=3,
        num_classes=1,
    ).double()
    loss_l2.proxies.data.copy_(loss.proxies.data)
    assert loss_l2(emb, labels).item() == pytest.approx(math.sqrt(2.0), rel=1e-9)

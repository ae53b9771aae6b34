"""Cross-batch metric learning (XML paper Eq. 2.4-2.11)."""

import pytest
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.losses import build_loss
from gspdml.models.output import EmbedderOutput


def make_xml(**kwargs):
    return build_loss(
        {"name": "xml", "base": {"name": "c2"}, "num_prototypes": 5, **kwargs},
        embedding_dim=6,
        num_classes=10,
    )


def batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    labels = torch.tensor([0, 0, 3, 3, 5, 5, 1, 1, 7, 7, 2, 2])
    local = torch.randn(12, 6, 3, 4, generator=g)
    pooled = local.mean((2, 3))
    return local, pooled, F.normalize(pooled, dim=1), labels


def histogram_loop(local, prototypes, eps):
    """Eq. 2.4's soft-max solution with explicit loops over images and locations."""
    b, d, h, w = local.shape
    out = torch.zeros(b, prototypes.shape[0], dtype=torch.float64)
    for i in range(b):
        for y in range(h):
            for x in range(w):
                out[i] += torch.softmax(
                    eps * (prototypes.double() @ local[i, :, y, x].double()), 0
                ) / (h * w)
    return out


def reference_xml(loss, local, pooled, labels, base_dtype=torch.float32):
    """Eq. 2.8-2.10 with the primal inversion V_k = (Z_k Z_k^T + ridge I)^-1 Z_k Y_k^T, in
    float64; the base loss of the predictions in ``base_dtype``."""
    z = histogram_loop(local, loss.prototypes.detach(), loss.eps)  # rows z_i
    y = pooled.double()
    total = 0.0
    halves = (slice(0, 6), slice(6, 12))
    for k in range(2):
        fit, pred = halves[1 - k], halves[k]
        zk, yk = z[fit].T, y[fit].T  # m x b, d x b (the paper's column layout)
        v = (
            torch.linalg.inv(zk @ zk.T + 0.05 * torch.eye(zk.shape[0], dtype=torch.float64))
            @ zk
            @ yk.T
        )  # m x d
        predicted = F.normalize((v.T @ z[pred].T).T, dim=1)
        total += loss.base(predicted.to(base_dtype), labels[pred]).double()
    return total


def test_loss_matches_equations():
    loss = make_xml(mixing=0.2)
    local, pooled, emb, labels = batch()
    got = loss(emb, labels, EmbedderOutput(emb, local=local, pooled=pooled))
    expected = 0.8 * loss.base(emb, labels).double() + 0.2 * reference_xml(
        loss, local, pooled, labels
    )
    torch.testing.assert_close(got.double(), expected, rtol=1e-4, atol=1e-5)


def test_uses_only_class_disjoint_halves():
    loss = make_xml()
    local, pooled, emb, labels = batch()
    # permuting samples inside each half changes nothing; moving one across the halves changes the
    # loss (the halves are the sampler's, checked once from the declaration, not at every step)
    inside = torch.tensor([1, 0, 4, 5, 2, 3, 11, 10, 9, 8, 7, 6])

    def args(idx):
        return emb[idx], labels[idx], EmbedderOutput(emb[idx], local=local[idx], pooled=pooled[idx])

    torch.testing.assert_close(loss(*args(inside)), loss(*args(torch.arange(12))))
    across = torch.tensor([0, 1, 2, 3, 4, 6, 5, 7, 8, 9, 10, 11])
    assert not torch.allclose(loss(*args(across)), loss(*args(torch.arange(12))))
    assert loss.batch_requirements().halves and loss.batch_requirements().reads == {"local"}


def test_gradients_reach_prototypes_and_features():
    loss = make_xml(mixing=1.0)
    local, _, _, labels = batch()
    local.requires_grad_()
    pooled = local.mean((2, 3))
    loss.cross_batch_loss(local, pooled, labels).backward()
    assert loss.prototypes.grad.abs().sum() > 0 and local.grad.abs().sum() > 0


def test_missing_or_mismatched_local_features():
    loss = make_xml()
    local, pooled, emb, labels = batch()
    with pytest.raises(ConfigError, match="output.local"):
        loss(emb, labels, EmbedderOutput(emb))
    wide = torch.randn(12, 7, 3, 4)
    with pytest.raises(ConfigError, match="6 channels but the local features have 7"):
        loss(emb, labels, EmbedderOutput(emb, local=wide, pooled=pooled))


def test_bf16_autocast_solves_in_float32():
    loss = make_xml()
    local, pooled, _, labels = batch()
    expected = loss.cross_batch_loss(local, pooled, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = loss.cross_batch_loss(local, pooled, labels)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, expected)

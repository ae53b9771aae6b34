import math

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import losses as pml_losses

from gspdml.errors import ConfigError
from gspdml.losses import LOSSES


def _build(spec, classes=5, dim=8):
    return LOSSES.build(spec, num_classes=classes, embedding_dim=dim).double()


def _slow_proxy_nca(emb, labels, proxies, temperature, exclude_positive):
    e, p = F.normalize(emb.detach(), dim=1), F.normalize(proxies.detach(), dim=1)
    total = 0.0
    for i in range(len(e)):
        logits = [-float(((e[i] - p[c]) ** 2).sum()) / temperature for c in range(len(p))]
        y = int(labels[i])
        denominator = sum(
            math.exp(v) for c, v in enumerate(logits) if not (exclude_positive and c == y)
        )
        total += -logits[y] + math.log(denominator)
    return total / len(e)


@pytest.mark.parametrize("assignment_probability", [False, True])
def test_proxy_nca_equals_slow_loop(make_batch, assignment_probability):
    emb, labels = make_batch(seed=24, classes=5, per_class=2)
    loss = _build(
        {"proxy_nca": {"temperature": 1 / 3, "assignment_probability": assignment_probability}}
    )
    expected = _slow_proxy_nca(emb, labels, loss.proxies, 1 / 3, not assignment_probability)
    assert loss(emb, labels).item() == pytest.approx(expected, rel=1e-10)


def test_proxynca_pp_is_cross_entropy_of_scaled_cosine(make_batch):
    """ProxyNCA++ paper Eq. 6 at T = 1/9: -d/T = 18 cos - 18, so the loss is CE(18 cos) (the authors' code)."""
    emb, labels = make_batch(seed=25, classes=5, per_class=3)
    loss = _build("proxynca_pp")
    cos = F.normalize(emb, dim=1) @ F.normalize(loss.proxies, dim=1).T
    squared = torch.cdist(F.normalize(emb, dim=1), F.normalize(loss.proxies, dim=1)) ** 2
    value = loss(emb, labels)
    assert value.item() == pytest.approx(F.cross_entropy(-9.0 * squared, labels).item(), rel=1e-10)
    assert value.item() == pytest.approx(F.cross_entropy(18.0 * cos, labels).item(), rel=1e-10)


def test_proxy_nca_matches_pytorch_metric_learning(make_batch):
    emb, labels = make_batch(seed=26, classes=8, per_class=8, dim=16)
    ours = _build({"proxynca_pp": {"temperature": 0.11}}, classes=8, dim=16)
    theirs = pml_losses.ProxyNCALoss(
        num_classes=8, embedding_size=16, softmax_scale=1 / 0.11
    ).double()
    theirs.proxies.data.copy_(ours.proxies.data)
    assert ours(emb, labels).item() == pytest.approx(theirs(emb, labels).item(), rel=1e-9)


def test_proxy_gradients_reach_proxies_and_lr_multiplier_is_configurable(make_batch):
    emb, labels = make_batch(seed=27, classes=5, per_class=2)
    loss = _build({"proxynca_pp": {"lr_multiplier": 1.0e5}})
    assert loss.lr_multiplier == 1.0e5
    assert LOSSES.build("proxy_nca", num_classes=5, embedding_dim=8).lr_multiplier == 100
    loss(emb, labels).backward()
    assert loss.proxies.grad is not None and loss.proxies.grad.abs().sum() > 0


def test_proxy_losses_name_missing_trainer_arguments_and_bad_labels(make_batch):
    with pytest.raises(ConfigError, match="num_classes"):
        LOSSES.build("proxynca_pp", embedding_dim=8)
    with pytest.raises(ConfigError, match="loss.num_classes: unknown option"):
        LOSSES.build({"proxynca_pp": {"num_classes": 3}}, "loss", num_classes=5, embedding_dim=8)
    emb, labels = make_batch(seed=28, classes=6, per_class=1)
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 5\)"):
        _build("proxynca_pp")(emb, labels)


def test_norm_softmax_matches_loop_and_pytorch_metric_learning(make_batch):
    emb, labels = make_batch(seed=29, classes=8, per_class=4, dim=16)
    ours = _build({"norm_softmax": {"temperature": 0.05}}, classes=8, dim=16)
    theirs = pml_losses.NormalizedSoftmaxLoss(
        num_classes=8, embedding_size=16, temperature=0.05
    ).double()
    theirs.W.data.copy_(ours.proxies.data.T)
    value = ours(emb, labels)
    e, p = F.normalize(emb.detach(), dim=1), F.normalize(ours.proxies.detach(), dim=1)
    slow = sum(
        -float(e[i] @ p[labels[i]]) / 0.05
        + math.log(sum(math.exp(float(e[i] @ p[c]) / 0.05) for c in range(8)))
        for i in range(len(e))
    ) / len(e)
    assert value.item() == pytest.approx(slow, rel=1e-10)
    assert value.item() == pytest.approx(theirs(emb, labels).item(), rel=1e-9)
    # ProxyNCA++ at temperature T is NormSoftmax at T / 2 with the same proxies
    pp = _build({"proxynca_pp": {"temperature": 0.1}}, classes=8, dim=16)
    pp.proxies.data.copy_(ours.proxies.data)
    assert pp(emb, labels).item() == pytest.approx(value.item(), rel=1e-10)

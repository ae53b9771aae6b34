import math

import pytest
import torch.nn.functional as F
from pytorch_metric_learning import losses as pml_losses

from gspdml.losses import LOSSES


def test_proxy_anchor_equals_slow_loop_and_pml(make_batch):
    emb, labels = make_batch(seed=30, classes=6, per_class=3, dim=16)
    loss = LOSSES.build(
        {"proxy_anchor": {"delta": 0.1, "alpha": 32}}, num_classes=9, embedding_dim=16
    ).double()
    value = loss(emb, labels)
    e, p = F.normalize(emb.detach(), dim=1), F.normalize(loss.proxies.detach(), dim=1)
    cos = e @ p.T
    present = sorted({int(y) for y in labels})
    pos = sum(
        math.log(
            1
            + sum(math.exp(-32 * (float(cos[i, c]) - 0.1)) for i in range(len(e)) if labels[i] == c)
        )
        for c in present
    ) / len(present)
    neg = (
        sum(
            math.log(
                1
                + sum(
                    math.exp(32 * (float(cos[i, c]) + 0.1)) for i in range(len(e)) if labels[i] != c
                )
            )
            for c in range(9)
        )
        / 9
    )
    assert value.item() == pytest.approx(pos + neg, rel=1e-10)
    theirs = pml_losses.ProxyAnchorLoss(
        num_classes=9, embedding_size=16, margin=0.1, alpha=32
    ).double()
    theirs.proxies.data.copy_(loss.proxies.data)
    assert value.item() == pytest.approx(theirs(emb, labels).item(), rel=1e-9)
    value.backward()
    assert loss.proxies.grad.abs().sum() > 0 and loss.lr_multiplier == 100

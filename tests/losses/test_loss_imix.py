"""i-Mix (Lee et al., ICLR 2021) as the Psomas thesis adapts it (Table 2.4), against loops."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gspdml.errors import ConfigError
from gspdml.losses import build_loss
from gspdml.models import Embedder
from gspdml.pooling.simple import GAP


def _similarity_contrastive_as_query(queries, keys, key_labels, first, second, lam, margin):
    """Eq. 2.7 with each mixture as the anchor over every clean key: per query the sum of
    -y s + (1 - y)[s - m]_+, y = lam [class = first's] + (1 - lam) [class = second's]; mean over
    the queries."""
    total = 0.0
    for q, c, d in zip(queries, first, second):
        for k, label in zip(keys, key_labels):
            s = float(q @ k)
            y = lam * (label == c) + (1 - lam) * (label == d)
            total += -y * s + (1 - y) * max(s - margin, 0.0)
    return total / len(queries)


def test_imix_mixes_each_anchor_with_one_negative_and_queries_the_clean_batch():
    torch.manual_seed(0)
    model = Embedder(nn.Identity(), GAP(3), nn.Conv2d(4, 3, 1).double())
    labels = torch.tensor([0, 0, 1, 1, 2, 3])
    images = torch.randn(6, 4, 2, 2, dtype=torch.float64)
    loss = build_loss(
        {"imix": {"loss": {"contrastive_similarity": {"margin": -0.2}}}},
        embedding_dim=3,
        num_classes=4,
    )
    torch.manual_seed(5)
    value = loss.training_objective(model, images, labels, lam=0.7).item()
    torch.manual_seed(5)  # the same partner draw, through the selection alone
    from gspdml.losses.metrix_pairs import mixing_triples

    triples = loss._select(mixing_triples(labels, "anc_neg"))
    assert triples[:, 0].tolist() == list(range(6)) and (triples[:, 0] == triples[:, 1]).all()
    assert all(labels[a] != labels[n] for a, _, n in triples.tolist())
    with torch.no_grad():
        e = F.normalize(model(images).embedding, dim=1)
        mixed = F.normalize(
            model(0.7 * images[triples[:, 1]] + 0.3 * images[triples[:, 2]]).embedding, dim=1
        )
    clean = float(loss.base.clean(e, labels))
    mixed_part = _similarity_contrastive_as_query(
        mixed,
        e,
        labels.tolist(),
        labels[triples[:, 1]].tolist(),
        labels[triples[:, 2]].tolist(),
        0.7,
        -0.2,
    )
    # the embedder returns float32 embeddings: float32 rounding, far below any wrong term
    assert value == pytest.approx(clean + 0.4 * mixed_part, rel=1e-5)


def test_partners_are_drawn_among_all_negatives():
    loss = build_loss("imix", embedding_dim=3, num_classes=4)
    labels = torch.tensor([0, 0, 1, 2, 3])
    from gspdml.losses.metrix_pairs import mixing_triples

    full = mixing_triples(labels, "anc_neg")
    torch.manual_seed(0)
    seen = {tuple(r) for _ in range(40) for r in loss._select(full).tolist()}
    assert seen == {tuple(r) for r in full.tolist()}


def test_bad_options_are_named():
    with pytest.raises(ConfigError, match="loss.loss"):
        build_loss({"imix": {"loss": "proxy_anchor"}}, embedding_dim=3, num_classes=4)
    with pytest.raises(ConfigError, match="loss.level"):
        build_loss({"imix": {"level": "pixels"}}, embedding_dim=3, num_classes=4)

"""Utilisation (Psomas thesis Eq. 2.24) on a hand-worked example and on Metrix's augmented set."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from gspdml.analysis.utilization import (
    augmented_training_set,
    nearest_squared_distances,
    utilization,
)
from gspdml.losses import build_loss
from gspdml.models import Embedder
from gspdml.pooling.simple import GAP


def test_hand_worked_example_clean_then_with_a_mixed_example():
    """Queries (0, 0), (3, 0); training set (1, 0), (0, 2): nearest squared distances 1 and 4, so
    u = 2.5. A mixed example (2.5, 0) brings the second query to 0.25: u = (1 + 0.25) / 2 = 0.625."""
    queries = torch.tensor([[0.0, 0.0], [3.0, 0.0]])
    clean = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    assert nearest_squared_distances(queries, clean).tolist() == [1.0, 4.0]
    assert utilization(queries, clean) == 2.5
    mixed = torch.tensor([[2.5, 0.0]])
    assert utilization(queries, [clean, mixed]) == 0.625
    assert utilization(queries, torch.cat([clean, mixed])) == 0.625
    assert utilization(queries, iter([mixed, torch.zeros(0, 2), clean])) == 0.625
    with pytest.raises(ValueError, match="dimension"):
        utilization(queries, torch.zeros(3, 5))
    with pytest.raises(ValueError, match="at least one reference"):
        utilization(queries, [torch.zeros(0, 2)])


def test_matches_a_brute_force_loop():
    g = torch.Generator().manual_seed(0)
    queries = torch.randn(7, 4, generator=g, dtype=torch.float64)
    refs = torch.randn(11, 4, generator=g, dtype=torch.float64)
    loop = sum(min(float(((q - x) ** 2).sum()) for x in refs) for q in queries) / len(queries)
    assert utilization(queries, refs.split(3)) == pytest.approx(loop, rel=1e-12)


def test_augmented_set_holds_the_clean_and_the_metrix_mixtures_and_lowers_utilization():
    torch.manual_seed(0)
    model = Embedder(nn.Identity(), GAP(3), nn.Conv2d(4, 3, 1).double()).train()
    g = torch.Generator().manual_seed(1)
    batches = [
        (
            torch.randn(6, 4, 2, 2, generator=g, dtype=torch.float64),
            torch.tensor([0, 0, 1, 1, 2, 2]),
        )
        for _ in range(2)
    ]
    loss = build_loss(
        {"metrix": {"level": "embedding", "pairs": "pos_neg", "renormalize": False}},
        embedding_dim=3,
        num_classes=3,
    )
    blocks = list(augmented_training_set(model, batches, loss, epochs=2))
    assert model.training and len(blocks) == 8  # clean + mixed, 2 batches, 2 epochs
    for (images, labels), clean, mixed in zip(batches * 2, blocks[0::2], blocks[1::2]):
        with torch.no_grad():
            e = F.normalize(model(images).embedding, dim=1)
        torch.testing.assert_close(clean, e)
        triples = [
            (p, n)
            for a in range(6)
            for p in range(6)
            for n in range(6)
            if p != a and labels[p] == labels[a] and labels[n] != labels[a]
        ]
        assert len(mixed) == len(triples)
        # one lambda per iteration: read it off the best-conditioned pair, then every mixture
        # must be that same convex combination of its two parents
        p, n = max(triples, key=lambda t: float((e[t[0]] - e[t[1]]).norm()))
        v = mixed[triples.index((p, n))]
        direction = e[p] - e[n]
        lam = float((v - e[n]) @ direction / (direction @ direction))
        assert 0 < lam < 1
        expected = torch.stack([lam * e[p] + (1 - lam) * e[n] for p, n in triples])
        torch.testing.assert_close(mixed, expected)
    queries = torch.randn(5, 3, generator=g, dtype=torch.float64)
    clean_only = list(augmented_training_set(model, batches, loss, mixed=False))
    assert len(clean_only) == 2
    assert utilization(queries, blocks) <= utilization(queries, clean_only)

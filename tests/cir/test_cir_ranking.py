"""AP (standard and Radenović trapezoid), R@k and P@k against hand-computed values and slow loops."""

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score

from gspdml.cir.ranking import (
    average_precision_ranked,
    precision_at_k_ranked,
    ranked_relevance,
    ranking_metrics,
    recall_at_k_ranked,
)
from gspdml.errors import ConfigError


def average_precision(scores, relevant, variant="standard"):
    """AP of every query ``[Q]`` (float64) from ``scores [Q, N]`` and ``relevant [Q, N]``."""
    return average_precision_ranked(ranked_relevance(scores, relevant), variant)


def ranked_vector(n, positive_ranks):
    rel = torch.zeros(n, dtype=torch.bool)
    rel[list(positive_ranks)] = True
    return rel


def test_ap_hand_check_of_the_spec():
    # positives at 0-based ranks {0, 3, 10}: standard (1/1 + 2/4 + 3/11)/3; trapezoid (Radenović's AP).
    rel = ranked_vector(12, [0, 3, 10])
    scores = -torch.arange(12, dtype=torch.float64)  # already in rank order
    assert average_precision(scores, rel, "standard").item() == pytest.approx(
        (1 + 2 / 4 + 3 / 11) / 3
    )
    assert average_precision(scores, rel, "standard").item() == pytest.approx(0.590909, abs=1e-6)
    trapezoid = ((1 + 1) / 2 + (1 / 3 + 2 / 4) / 2 + (2 / 10 + 3 / 11) / 2) / 3
    assert average_precision(scores, rel, "trapezoid").item() == pytest.approx(trapezoid)
    # the reference table prints 0.551008; the exact value is 0.5510101 (its last digits are rounded)
    assert average_precision(scores, rel, "trapezoid").item() == pytest.approx(0.551008, abs=5e-6)


def test_trapezoid_map_of_the_freedom_code_example():
    # the test of github.com/NikosEfth/freedom: compute_map([[0,1,0,1,0,0],[1,0,0,0,0,1]]) = 48.33
    rel = torch.tensor([[0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 1]], dtype=torch.bool)
    scores = -torch.arange(6, dtype=torch.float64).expand(2, 6)
    assert 100 * average_precision(scores, rel, "trapezoid").mean().item() == pytest.approx(
        48.3333, abs=1e-3
    )


def slow_ap(scores, rel, variant):
    order = sorted(range(len(scores)), key=lambda i: -scores[i])  # Python's sort is stable
    hits, total, npos = 0, 0.0, sum(rel)
    for rank, i in enumerate(order):
        if rel[i]:
            after = (hits + 1) / (rank + 1)
            before = 1.0 if rank == 0 else hits / rank
            total += after if variant == "standard" else (before + after) / 2
            hits += 1
    return total / npos if npos else 0.0


def test_ap_matches_slow_loop_and_sklearn_with_ties():
    rng = np.random.default_rng(3)
    scores = np.round(rng.standard_normal((20, 40)), 1)  # many exact ties
    rel = rng.random((20, 40)) < 0.2
    rel[0] = False  # a query without positives
    for variant in ("standard", "trapezoid"):
        got = average_precision(torch.from_numpy(scores), torch.from_numpy(rel), variant).numpy()
        want = [slow_ap(list(s), list(r), variant) for s, r in zip(scores, rel)]
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    distinct = rng.standard_normal((5, 30))
    rel = rng.random((5, 30)) < 0.3
    got = average_precision(torch.from_numpy(distinct), torch.from_numpy(rel), "standard").numpy()
    np.testing.assert_allclose(
        got, [average_precision_score(r, s) for s, r in zip(distinct, rel)], atol=1e-12
    )


def test_recall_and_precision_at_k():
    ranked = torch.stack([ranked_vector(10, [0, 3, 4]), ranked_vector(10, [9])])
    recall = recall_at_k_ranked(ranked, [1, 4, 10])
    assert recall[1].tolist() == [1 / 3, 0.0]
    assert recall[4].tolist() == [2 / 3, 0.0]
    assert recall[10].tolist() == [1.0, 1.0]
    capped = precision_at_k_ranked(ranked, [1, 5], capped=True)  # / min(#positives, k)
    assert capped[1].tolist() == [1.0, 0.0]
    assert capped[5].tolist() == [1.0, 0.0]
    plain = precision_at_k_ranked(ranked, [5], capped=False)
    assert plain[5].tolist() == [3 / 5, 0.0]


def test_ranking_is_stable_and_metrics_share_it():
    scores = torch.tensor([[0.5, 0.9, 0.5, 0.1]])
    rel = torch.tensor([[False, False, True, False]])
    assert ranked_relevance(scores, rel).tolist() == [
        [False, False, True, False]
    ]  # 0.5 tie: index 0 first
    metrics = ranking_metrics(scores, rel, recall_at=[2, 3])
    assert metrics["ap_standard"].item() == pytest.approx(1 / 3)
    assert metrics["recall@2"].item() == 0.0 and metrics["recall@3"].item() == 1.0


def test_bad_arguments_name_the_problem():
    with pytest.raises(ConfigError, match="unknown AP variant 'auc'"):
        average_precision(torch.zeros(1, 3), torch.zeros(1, 3, dtype=torch.bool), "auc")
    with pytest.raises(ConfigError, match="same shape"):
        average_precision(torch.zeros(2, 3), torch.zeros(2, 4, dtype=torch.bool))
    with pytest.raises(ConfigError, match=">= 1"):
        ranking_metrics(torch.zeros(1, 3), torch.zeros(1, 3, dtype=torch.bool), recall_at=[0])

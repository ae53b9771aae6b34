"""The whole-ranking mAP and MRR on tied embeddings rank each distinct reference vector once:
the work (exact float64 distances) is counted, never timed."""

import numpy as np
import pytest
import torch

from gspdml.evaluation import retrieval_metrics, whole_ranking

WHOLE = ("mean_average_precision", "mean_reciprocal_rank")


def count_exact_pairs(monkeypatch):
    pairs = []
    original = whole_ranking.exact_squared_distances

    def counted(q, r, cand, *args):
        pairs.append(cand.numel())
        return original(q, r, cand, *args)

    monkeypatch.setattr(whole_ranking, "exact_squared_distances", counted)
    return pairs


@pytest.mark.parametrize("distinct", [1, 2])
def test_equal_and_two_point_embeddings_cost_one_distance_per_query_and_vector(
    distinct, monkeypatch
):
    g = torch.Generator().manual_seed(distinct)
    n = 1500
    points = torch.nn.functional.normalize(torch.randn(distinct, 16, generator=g), dim=1)
    x = points[torch.randint(0, distinct, (n,), generator=g)]
    labels = torch.randint(0, 250, (n,), generator=g)
    pairs = count_exact_pairs(monkeypatch)
    m = retrieval_metrics(x, labels, metrics=WHOLE)
    assert sum(pairs) <= n * distinct  # the old engine compared every tied pair: ~n^2
    # the tie values: a relevant reference ranks behind every reference at its distance
    x64, y = x.double(), labels.numpy()
    ap, rr = [], []
    for i in range(n):
        rows = np.r_[0:i, i + 1 : n]
        d = ((x64[rows] - x64[i]) ** 2).sum(1).numpy()
        rel = y[rows] == y[i]
        if not rel.any():
            continue
        ranks = np.array([(d <= d[j]).sum() for j in np.flatnonzero(rel)])
        hits = np.array([(rel & (d <= d[j])).sum() for j in np.flatnonzero(rel)])
        ap.append(np.mean(hits / ranks))
        rr.append(1 / ranks.min())
    assert m["mean_average_precision"] == pytest.approx(np.mean(ap), rel=1e-12)
    assert m["mean_reciprocal_rank"] == pytest.approx(np.mean(rr), rel=1e-12)

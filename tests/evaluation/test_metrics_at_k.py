"""The metrics at a cutoff K (map_at_k, map_hits_at_k, map_capped_at_k, mrr_at_k, precision_at_k,
precision_capped_at_k) against a slow loop over float64 distances: ties broken by index, lone
queries, K larger than the gallery, and searches truncated at K (query -> gallery at k, an ANN
index's results)."""

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation import RetrievalResults, knn, retrieval_metrics
from gspdml.evaluation.metrics import metrics_from_results, per_query_scores

AT_K = (
    "map_at_k",
    "map_hits_at_k",
    "map_capped_at_k",
    "mrr_at_k",
    "precision_at_k",
    "precision_capped_at_k",
)


def slow_scores(query, q_labels, reference, r_labels, K, leave_one_out):
    """{metric: [value per scored query]} by a Python loop: rank every reference by (float64
    squared distance, index), then apply each definition to the first K."""
    out = {name: [] for name in AT_K}
    q = np.asarray(query, np.float64)
    r = np.asarray(reference, np.float64)
    for i in range(len(q)):
        rows = [j for j in range(len(r)) if not (leave_one_out and j == i)]
        d = ((r[rows] - q[i]) ** 2).sum(1)
        order = sorted(range(len(rows)), key=lambda t: (d[t], rows[t]))
        rel = [int(r_labels[rows[t]] == q_labels[i]) for t in order]
        R = sum(rel)
        if R == 0:
            continue  # a lone query is not scored
        top = rel[:K]
        precisions = [sum(top[: j + 1]) / (j + 1) for j in range(len(top)) if top[j]]
        hits = sum(top)
        out["map_at_k"].append(sum(precisions) / R)
        out["map_hits_at_k"].append(sum(precisions) / hits if hits else 0.0)
        out["map_capped_at_k"].append(sum(precisions) / min(K, R))
        out["mrr_at_k"].append(1.0 / (top.index(1) + 1) if hits else 0.0)
        out["precision_at_k"].append(hits / K)
        out["precision_capped_at_k"].append(hits / min(K, R))
    return {name: float(np.mean(v)) for name, v in out.items()}


def coarse(n, dim, seed):
    """Integer coordinates in {0, 1, 2}: many tied distances and duplicated rows."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 3, (n, dim), generator=g).float()


@pytest.mark.parametrize("seed", [0, 1])
def test_leave_one_out_with_ties_duplicates_and_lone_queries_equals_a_loop(seed):
    x = coarse(70, 3, seed)
    order = torch.randperm(70, generator=torch.Generator().manual_seed(seed + 10))
    labels = order % 11
    labels[:4] = 100 + torch.arange(4)  # four lone queries (every class keeps >= 2 rows)
    Ks = (1, 3, 7, 200)  # 200 > the 69 searchable references
    m = retrieval_metrics(x, labels, recall_at=Ks, metrics=AT_K)
    assert m["num_lone_queries"] == 4
    for K in Ks:
        expected = slow_scores(x, labels, x, labels, K, leave_one_out=True)
        for name in AT_K:
            key = name[: -len("_k")] + "_k"
            assert m[key][K] == pytest.approx(expected[name], rel=1e-12, abs=1e-15), (name, K)


def test_query_gallery_search_truncated_at_k_equals_a_loop():
    g = torch.Generator().manual_seed(3)
    q, r = coarse(40, 4, 4), coarse(90, 4, 5)
    q_labels, r_labels = (
        torch.randint(0, 15, (40,), generator=g),
        torch.randint(0, 15, (90,), generator=g),
    )
    for K in (1, 5, 12):
        distances, indices = knn(q, r, K)  # the search stops at K, shorter than most R_i
        results = RetrievalResults.from_labels(
            indices, distances, q_labels.numpy(), r_labels.numpy()
        )
        assert results.k == K and results.r_max == 9
        m = metrics_from_results(results, recall_at=(K,), metrics=AT_K)
        expected = slow_scores(q, q_labels, r, r_labels, K, leave_one_out=False)
        for name in AT_K:
            key = name[: -len("_k")] + "_k"
            assert m[key][K] == pytest.approx(expected[name], rel=1e-12, abs=1e-15), (name, K)


def test_an_ann_index_results_are_scored_as_they_are_ranked():
    # An approximate index returns its own order; the metrics read that order, nothing else:
    # query 0 ranks [b, a, a] (R = 3), query 1 ranks [a, b, b] (R = 1), K = 3.
    labels_r = np.array(["a", "b", "a", "a", "b"])
    indices = torch.tensor([[1, 0, 2], [0, 1, 4]])
    distances = torch.tensor([[0.1, 0.2, 0.3], [0.5, 0.6, 0.7]])
    results = RetrievalResults.from_labels(indices, distances, ["a", "b"], labels_r)
    s = per_query_scores(results, recall_at=(3,), metrics=AT_K)
    p0 = (1 / 2 + 2 / 3) / 3  # hits at 2 and 3, R = 3
    p1 = (1 / 2 + 2 / 3) / 2  # query 1: R = 2 (rows 1 and 4), hits at 2 and 3
    assert s["map_at_3"].tolist() == pytest.approx([p0, p1])
    assert s["map_hits_at_3"].tolist() == pytest.approx([(1 / 2 + 2 / 3) / 2, p1])
    assert s["map_capped_at_3"].tolist() == pytest.approx([p0, p1])
    assert s["mrr_at_3"].tolist() == pytest.approx([1 / 2, 1 / 2])
    assert s["precision_at_3"].tolist() == pytest.approx([2 / 3, 2 / 3])
    assert s["precision_capped_at_3"].tolist() == pytest.approx([2 / 3, 1.0])


def test_a_search_shallower_than_k_is_refused_unless_it_holds_every_reference():
    x = coarse(30, 3, 6)
    labels = np.arange(30) % 5
    distances, indices = knn(x, x, 4)
    results = RetrievalResults.from_labels(indices, distances, labels, labels)
    with pytest.raises(ConfigError, match="k >= 6"):
        metrics_from_results(results, recall_at=(6,), metrics=("map_at_k",))
    distances, indices = knn(x, x, 30)  # every reference: K = 50 reads all 30
    results = RetrievalResults.from_labels(indices, distances, labels, labels)
    m = metrics_from_results(results, recall_at=(50,), metrics=("map_at_k", "mrr_at_k"))
    assert m["map_at_k"][50] == pytest.approx(
        slow_scores(x, labels, x, labels, 50, False)["map_at_k"]
    )


def test_metrics_at_k_report_under_their_stems_and_only_when_named():
    x = coarse(40, 3, 7)
    labels = np.arange(40) % 6
    default = retrieval_metrics(x, labels, recall_at=(1, 5))
    assert not any(key.startswith(("map_at_k", "mrr_at", "precision_at_k")) for key in default)
    m = retrieval_metrics(x, labels, recall_at=(1, 5), metrics=("map_at_k", "recall_at"))
    assert set(m["map_at_k"]) == {1, 5} and set(m["recall_at_k"]) == {1, 5}
    from gspdml.evaluation.metrics import flatten_metrics

    flat = flatten_metrics(m)
    assert flat["map_at_5"] == m["map_at_k"][5] and flat["recall_at_1"] == m["recall_at_k"][1]

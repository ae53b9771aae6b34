"""Retrieval metrics: hand-computed cases, ties, duplicates, and pytorch-metric-learning."""

import math

import numpy as np
import pytest
import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
from sklearn.metrics import normalized_mutual_info_score

from gspdml.evaluation import clustering_scores, kmeans_assignments, retrieval_metrics

#: pytorch-metric-learning's names; the last two it computes over its k neighbours, so they are
#: compared with a search of every reference (k=None), the first three with k = max R
PML_KEYS = {
    "precision_at_1": "precision_at_1",
    "r_precision": "r_precision",
    "map_at_r": "mean_average_precision_at_r",
    "mean_average_precision": "mean_average_precision",
    "mean_reciprocal_rank": "mean_reciprocal_rank",
}
PML_WHOLE_RANKING = ("mean_average_precision", "mean_reciprocal_rank")


def column(values):
    return torch.tensor(values, dtype=torch.float64)[:, None]


def test_spec_toy_example_with_a_tie():
    # 1-D [0, 1, 2, 10, 11], labels [a, a, b, b, b]. Query 1 is equidistant from 0 (a) and 2 (b):
    # the tie rule (distance, index) ranks 0 first, so its P@1 is 1. Query 2 ranks 1, 0 (both a)
    # before its own class: P@1 = R-precision = MAP@R = 0. Queries 0, 3, 4 are perfect.
    m = retrieval_metrics(
        column([0, 1, 2, 10, 11]),
        np.array(["a", "a", "b", "b", "b"]),
        class_average=True,
        per_class=True,
    )
    for key in ("precision_at_1", "r_precision", "map_at_r"):
        assert m[key] == pytest.approx(0.8)
    # The whole ranking of query 2 is 1 (a), 0 (a), 3 (b), 4 (b): AP (1/3 + 2/4) / 2, RR 1/3.
    assert m["mean_average_precision"] == pytest.approx((4 + 5 / 12) / 5)
    assert m["mean_reciprocal_rank"] == pytest.approx((4 + 1 / 3) / 5)
    assert m["recall_at_k"] == pytest.approx({1: 0.8, 2: 0.8, 4: 1.0, 8: 1.0})
    assert m["class_averaged"]["precision_at_1"] == pytest.approx((1.0 + 2.0 / 3.0) / 2)
    assert m["per_class"]["b"]["map_at_r"] == pytest.approx(2.0 / 3.0)
    assert m["num_queries"] == 5 and m["num_lone_queries"] == 0 and m["k"] == 4
    assert m["nmi"] is None


def test_duplicates_stay_valid_and_ties_go_to_the_lower_index():
    # [0, 0, 3, 3, 5] labels [a, b, a, b, b]; R = 1 for a, 2 for b; k = max R = 2.
    # q0: 1 (dup, b, d=0), then 2 (a) and 3 (b) tie at 9 -> 2 first: rel [0, 1] -> MRR 1/2, mAP 1/2.
    # q1: 0 (a, d=0), 2 (a, 9) -> rel [0, 0].  q2: 3 (b, 0), 4 (b, 4) -> rel [0, 0].
    # q3: 2 (a, 0), 4 (b, 4) -> rel [0, 1]: R-prec 1/2, MAP@R 1/4, MRR 1/2.
    # q4: 2 (a) and 3 (b) tie at 4 -> 2 first: rel [0, 1], same as q3.
    # Whole rankings (mAP, MRR): q0 [0, 1, 0, 0] -> AP 1/2, RR 1/2; q1 [0, 0, 1, 1] -> AP 5/12,
    # RR 1/3; q2 [0, 0, 1, 0] (0 before 1 at 9) -> 1/3, 1/3; q3, q4 [0, 1, 0, 1] -> 1/2, 1/2.
    m = retrieval_metrics(column([0, 0, 3, 3, 5]), np.array([0, 1, 0, 1, 1]), recall_at=(1, 2))
    assert m["precision_at_1"] == 0.0
    assert m["r_precision"] == pytest.approx(1.0 / 5)
    assert m["map_at_r"] == pytest.approx(0.5 / 5)
    assert m["mean_reciprocal_rank"] == pytest.approx(13 / 30)
    assert m["mean_average_precision"] == pytest.approx(27 / 12 / 5)
    assert m["recall_at_k"] == pytest.approx({1: 0.0, 2: 0.6})


def test_query_gallery_mode_excludes_and_counts_lone_queries():
    # Gallery [0 (a), 4 (b), 5 (a)]; queries 1 (a), 4.5 (b), 9 (c: no gallery item).
    # q0: 0 (a), 4 (b), 5 (a): R = 2, rel [1, 0] -> MAP@R 1/2, R-prec 1/2.
    # q1: 4 and 5 tie at 0.25 -> 4 (b) first: R = 1 -> 1.
    m = retrieval_metrics(
        column([1, 4.5, 9]), ["a", "b", "c"], column([0, 4, 5]), ["a", "b", "a"], recall_at=(1,)
    )
    assert m["num_queries"] == 2 and m["num_lone_queries"] == 1
    assert m["map_at_r"] == pytest.approx(0.75)
    assert m["r_precision"] == pytest.approx(0.75)
    assert m["precision_at_1"] == 1.0


def test_all_lone_queries_give_nan():
    m = retrieval_metrics(column([0, 1]), [0, 1], recall_at=(1,))
    assert math.isnan(m["map_at_r"]) and m["num_queries"] == 0 and m["num_lone_queries"] == 2


def normalized(n, dim, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(
        torch.randn(n, dim, generator=g, dtype=torch.float64), dim=1
    )


def pml(query, query_labels, reference=None, reference_labels=None, **kwargs):
    cut = [k for k in PML_KEYS.values() if k not in PML_WHOLE_RANKING]
    out = {}
    for include, k in ((cut, "max_bin_count"), (PML_WHOLE_RANKING, None)):
        calc = AccuracyCalculator(include=tuple(include), k=k, **kwargs)
        out.update(calc.get_accuracy(query, query_labels, reference, reference_labels))
    return out


def assert_matches_pml(ours, theirs):
    for key, pml_key in PML_KEYS.items():
        assert ours[key] == pytest.approx(theirs[pml_key], abs=1e-6), key


def test_leave_one_out_equals_pml():
    x = normalized(400, 16, 0)
    labels = torch.randint(0, 50, (400,), generator=torch.Generator().manual_seed(1))
    labels[:3] = 1000 + torch.arange(3)  # three lone queries
    ours = retrieval_metrics(x, labels)
    assert ours["num_lone_queries"] == 3
    assert_matches_pml(ours, pml(x, labels))


def test_query_reference_equals_pml_with_lone_labels():
    q, r = normalized(200, 12, 2), normalized(300, 12, 3)
    g = torch.Generator().manual_seed(4)
    q_labels, r_labels = (
        torch.randint(0, 45, (200,), generator=g),
        torch.randint(0, 40, (300,), generator=g),
    )
    ours = retrieval_metrics(q, q_labels, r, r_labels)
    assert ours["num_lone_queries"] == int((q_labels >= 40).sum()) > 0
    assert_matches_pml(ours, pml(q, q_labels, r, r_labels))


def test_class_averaged_and_per_class_equal_pml():
    x = normalized(300, 8, 5)
    labels = torch.randint(0, 30, (300,), generator=torch.Generator().manual_seed(6))
    ours = retrieval_metrics(x, labels, class_average=True, per_class=True)
    assert_matches_pml(ours["class_averaged"], pml(x, labels, avg_of_avgs=True))
    per_class = pml(x, labels, return_per_class=True)
    for key, pml_key in PML_KEYS.items():
        ours_list = [ours["per_class"][c][key] for c in sorted(ours["per_class"])]
        np.testing.assert_allclose(ours_list, per_class[pml_key], atol=1e-6)


def test_recall_at_k_equals_a_python_loop():
    x = normalized(120, 6, 7)
    labels = torch.randint(0, 15, (120,), generator=torch.Generator().manual_seed(8)).numpy()
    d = torch.cdist(x, x)
    d.fill_diagonal_(float("inf"))
    order = d.argsort(dim=1).numpy()
    m = retrieval_metrics(x, labels, recall_at=(1, 3, 10))
    for K in (1, 3, 10):
        hits = [
            labels[i] in labels[order[i, :K]] for i in range(120) if (labels == labels[i]).sum() > 1
        ]
        assert m["recall_at_k"][K] == pytest.approx(np.mean(hits))


def test_clustering_scores_on_separated_clusters():
    centers = normalized(5, 8, 9) * 10
    labels = np.repeat(np.arange(5), 20)
    x = centers[labels] + 0.01 * normalized(100, 8, 10)
    assert clustering_scores(x, labels, seed=0) == pytest.approx({"nmi": 1.0, "ami": 1.0})
    m = retrieval_metrics(x, labels, clustering=True, recall_at=(1,))
    assert m["nmi"] == pytest.approx(1.0)
    # faiss k-means (random-subset initialisation) may stop in a local optimum: check consistency.
    clusters = kmeans_assignments(x, 5, backend="faiss", seed=3)
    assert set(clusters.tolist()) <= set(range(5))
    nmi = retrieval_metrics(
        x, labels, clustering=True, kmeans_backend="faiss", seed=3, recall_at=(1,)
    )["nmi"]
    assert nmi == pytest.approx(normalized_mutual_info_score(labels, clusters))


def slow_average_precision(order, labels, i):
    """AP of query i by a Python loop over its whole ranking ``order``: the mean, over the
    relevant references, of the precision at the rank of each; and its reciprocal rank."""
    hits, precisions, first = 0, [], None
    for rank, j in enumerate(order, start=1):
        if labels[j] == labels[i]:
            hits += 1
            precisions.append(hits / rank)
            first = first or rank
    return sum(precisions) / len(precisions), 1.0 / first


def test_full_map_and_uncut_mrr_equal_a_loop_with_ties():
    # Coarse coordinates give many tied distances; the pinned tie rule (distance, then index)
    # orders them, so the loop ranks by (distance, index) too (sklearn averages over ties, so it
    # is the reference only without them: the next test).
    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, 4, (150, 3), generator=g).double()
    labels = torch.randint(0, 12, (150,), generator=g).numpy()
    m = retrieval_metrics(x, labels, recall_at=(1,))
    d = torch.cdist(x, x).numpy()
    aps, rrs = [], []
    for i in range(len(x)):
        others = np.array([j for j in range(len(x)) if j != i])
        if not (labels[others] == labels[i]).any():
            continue
        order = others[np.lexsort((others, d[i, others]))]
        ap, rr = slow_average_precision(order, labels, i)
        aps.append(ap)
        rrs.append(rr)
    assert m["mean_average_precision"] == pytest.approx(np.mean(aps))
    assert m["mean_reciprocal_rank"] == pytest.approx(np.mean(rrs))
    assert m["mean_average_precision"] > m["map_at_r"]


def test_full_map_equals_sklearn_without_ties():
    from sklearn.metrics import average_precision_score

    q, r = normalized(60, 8, 12), normalized(90, 8, 13)
    g = torch.Generator().manual_seed(14)
    q_labels = torch.randint(0, 9, (60,), generator=g)
    r_labels = torch.randint(0, 9, (90,), generator=g)
    m = retrieval_metrics(q, q_labels, r, r_labels, recall_at=(1,))
    d = torch.cdist(q, r).numpy()
    per_query = [
        average_precision_score((r_labels == q_labels[i]).numpy(), -d[i])
        for i in range(len(q))
        if (r_labels == q_labels[i]).any()
    ]
    assert m["mean_average_precision"] == pytest.approx(np.mean(per_query))
    assert m["k"] == len(r)

"""Retrieval metrics: hand-computed cases, ties, duplicates, and pytorch-metric-learning."""

import numpy as np
import pytest
import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
from sklearn.metrics import average_precision_score, normalized_mutual_info_score

from gspdml.errors import ConfigError
from gspdml.evaluation import (
    clustering_scores,
    kmeans_assignments,
    retrieval_metrics,
    whole_ranking,
)
from gspdml.evaluation.exact_knn import DEFAULT_MEMORY_BUDGET, retrieve
from gspdml.evaluation.metric_registry import default_query_metrics
from gspdml.evaluation.metrics import NoQueryToScore, metrics_from_results, per_query_scores
from gspdml.evaluation.service import EvalSpec, evaluate_embeddings

#: pytorch-metric-learning's names; the last two it computes over its k neighbours, so they are
#: compared with a search of every reference (k=None), the first three with k = max R
PML_KEYS = {
    "precision_at_1": "precision_at_1",
    "r_precision": "r_precision",
    "map_at_r": "mean_average_precision_at_r",
    "mean_average_precision": "mean_average_precision",
    "mean_reciprocal_rank": "mean_reciprocal_rank",
}
#: the default metrics and the whole-ranking ones, which are computed when named
WITH_WHOLE = (*default_query_metrics(), "mean_average_precision", "mean_reciprocal_rank")
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
        metrics=WITH_WHOLE,
        class_average=True,
        per_class=True,
    )
    for key in ("precision_at_1", "r_precision", "map_at_r"):
        assert m[key] == pytest.approx(0.8)
    # Whole rankings (mAP, MRR; a tie group ranks as a whole): query 1 has 0 (a) and 2 (b) tied
    # at rank 2 -> AP 1/2, RR 1/2; query 2 ranks 1 (a), 0 (a), 3 (b), 4 (b) -> AP (1/3 + 2/4) / 2,
    # RR 1/3; queries 0, 3, 4 score 1.
    assert m["mean_average_precision"] == pytest.approx((3 + 1 / 2 + 5 / 12) / 5)
    assert m["mean_reciprocal_rank"] == pytest.approx((3 + 1 / 2 + 1 / 3) / 5)
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
    # Whole rankings (mAP, MRR), tie groups ranked as a whole (rank = references at a distance
    # <= that of the relevant one): q0: 2 (a) ties with 3 (b) at 9, rank 3 -> AP 1/3, RR 1/3.
    # q1: 3 (b, 9) rank 3, 4 (b, 25) rank 4 -> AP (1/3 + 2/4) / 2 = 5/12, RR 1/3. q2: 0 (a, 9)
    # ties with 1 at 9, rank 4 -> 1/4, 1/4. q3: 4 (b, 4) rank 2, 1 (b, 9) rank 4 -> AP
    # (1/2 + 2/4) / 2 = 1/2, RR 1/2; q4 likewise (3 at 4 tied with 2, 1 at 25 tied with 0).
    m = retrieval_metrics(
        column([0, 0, 3, 3, 5]), np.array([0, 1, 0, 1, 1]), recall_at=(1, 2), metrics=WITH_WHOLE
    )
    assert m["precision_at_1"] == 0.0
    assert m["r_precision"] == pytest.approx(1.0 / 5)
    assert m["map_at_r"] == pytest.approx(0.5 / 5)
    assert m["mean_reciprocal_rank"] == pytest.approx(23 / 60)
    assert m["mean_average_precision"] == pytest.approx(2 / 5)
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


def test_all_lone_queries_are_an_error_not_nan():
    """Every class one image: the metrics were NaN with ``num_queries: 0`` (issue 39 #8)."""
    with pytest.raises(NoQueryToScore, match="no query to score: no class has two of the images"):
        retrieval_metrics(column([0, 1]), [0, 1], recall_at=(1,))
    with pytest.raises(NoQueryToScore, match="no query's class is in the gallery"):
        retrieval_metrics(column([0, 1]), [0, 1], column([2, 3]), [2, 3], recall_at=(1,))
    with pytest.raises(NoQueryToScore):
        evaluate_embeddings(column([0, 1]), [0, 1])


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
    ours = retrieval_metrics(x, labels, metrics=WITH_WHOLE)
    assert ours["num_lone_queries"] == 3
    assert_matches_pml(ours, pml(x, labels))


def test_query_reference_equals_pml_with_lone_labels():
    q, r = normalized(200, 12, 2), normalized(300, 12, 3)
    g = torch.Generator().manual_seed(4)
    q_labels, r_labels = (
        torch.randint(0, 45, (200,), generator=g),
        torch.randint(0, 40, (300,), generator=g),
    )
    ours = retrieval_metrics(q, q_labels, r, r_labels, metrics=WITH_WHOLE)
    assert ours["num_lone_queries"] == int((q_labels >= 40).sum()) > 0
    assert_matches_pml(ours, pml(q, q_labels, r, r_labels))


def test_class_averaged_and_per_class_equal_pml():
    x = normalized(300, 8, 5)
    labels = torch.randint(0, 30, (300,), generator=torch.Generator().manual_seed(6))
    ours = retrieval_metrics(x, labels, metrics=WITH_WHOLE, class_average=True, per_class=True)
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


def slow_average_precision(distances, relevant):
    """AP and RR of one query by Python loops over its references (``distances`` to each,
    ``relevant`` flags): each relevant reference j counts the references at a distance <= its
    own (its rank, a tie group ranked as a whole) and the relevant ones among them."""
    precisions, ranks = [], []
    for j in np.flatnonzero(relevant):
        rank = sum(1 for d in distances if d <= distances[j])
        hits = sum(1 for d, rel in zip(distances, relevant) if rel and d <= distances[j])
        precisions.append(hits / rank)
        ranks.append(rank)
    return sum(precisions) / len(precisions), 1.0 / min(ranks)


def per_query_reference(x, labels, reference=None, reference_labels=None):
    """AP and RR of every non-lone query by :func:`slow_average_precision`, and sklearn's
    ``average_precision_score`` of the same scores (minus the float64 squared distances)."""
    loo = reference is None
    reference = x if loo else reference
    reference_labels = labels if loo else reference_labels
    d = ((x[:, None, :].double() - reference[None].double()) ** 2).sum(-1).numpy()
    out = []
    for i in range(len(x)):
        keep = np.arange(len(reference)) != i if loo else np.ones(len(reference), bool)
        relevant = np.asarray(reference_labels)[keep] == np.asarray(labels)[i]
        if relevant.any():
            ap, rr = slow_average_precision(d[i, keep], relevant)
            out.append((ap, rr, average_precision_score(relevant, -d[i, keep])))
    return np.array(out).T


def test_full_map_and_uncut_mrr_equal_a_loop_and_sklearn_with_ties_and_duplicates():
    # Coarse coordinates give many tied distances and duplicated embeddings; a tie group is
    # ranked as a whole, as sklearn's average_precision_score groups equal scores.
    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, 4, (150, 3), generator=g).float()
    labels = torch.randint(0, 12, (150,), generator=g).numpy()
    for args in ((x, labels), (x[:50], labels[:50], x[50:], labels[50:])):
        m = retrieval_metrics(*args, recall_at=(1,), metrics=WITH_WHOLE, memory_budget=2**12)
        ap, rr, sklearn_ap = per_query_reference(*args)
        assert np.allclose(ap, sklearn_ap, rtol=1e-12, atol=0)
        assert m["mean_average_precision"] == pytest.approx(np.mean(ap), rel=1e-12)
        assert m["mean_reciprocal_rank"] == pytest.approx(np.mean(rr), rel=1e-12)
        assert m["mean_average_precision"] > m["map_at_r"]


def test_full_map_equals_sklearn_without_ties_and_the_k_needs_no_whole_ranking():
    q, r = normalized(60, 8, 12), normalized(90, 8, 13)
    g = torch.Generator().manual_seed(14)
    q_labels = torch.randint(0, 9, (60,), generator=g)
    r_labels = torch.randint(0, 9, (90,), generator=g)
    m = retrieval_metrics(q, q_labels, r, r_labels, recall_at=(1,), metrics=WITH_WHOLE)
    ap, rr, sklearn_ap = per_query_reference(q, q_labels, r, r_labels)
    assert m["mean_average_precision"] == pytest.approx(np.mean(sklearn_ap), rel=1e-12)
    assert m["mean_reciprocal_rank"] == pytest.approx(np.mean(rr), rel=1e-12)
    assert m["k"] == int(torch.bincount(r_labels).max())  # max R, not every reference


@pytest.mark.parametrize("compare_width", [0, 1000], ids=["searchsorted", "comparisons"])
def test_whole_ranking_blocks_equal_a_search_of_every_reference(compare_width, monkeypatch):
    # The blocked computation from embeddings (any block size) and the scores read from a search
    # of every reference (metrics_from_results) are the same numbers, ties included, whichever
    # way the certain references ahead are counted.
    monkeypatch.setattr(whole_ranking, "_COMPARE_WIDTH", compare_width)
    # A near-collapsed model too: 1 + 1e-9 noise, where the approximate distances of step 1
    # need the translation and nearly every comparison is decided exactly.
    g = torch.Generator().manual_seed(21)
    mixed = torch.cat([normalized(80, 5, 22), torch.randint(0, 3, (40, 5), generator=g) / 2.0])
    near = 1.0 + 1e-9 * torch.randn(120, 5, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 7, (120,), generator=g)
    names = ["mean_average_precision", "mean_reciprocal_rank"]
    for x in (mixed, near):
        full = metrics_from_results(retrieve(x, labels, k=119), metrics=names, per_class=True)
        for budget in (2**13, 2**16, DEFAULT_MEMORY_BUDGET):
            blocked = retrieval_metrics(
                x, labels, metrics=names, per_class=True, memory_budget=budget
            )
            for name in names:
                assert blocked[name] == pytest.approx(full[name], rel=1e-12)
                for c, values in full["per_class"].items():
                    assert blocked["per_class"][c][name] == pytest.approx(values[name], rel=1e-12)


def test_a_collapsed_embedding_scores_the_tie_values():
    # All embeddings equal: every reference is tied, so every relevant one ranks N-th:
    # AP = R_i / N, RR = 1 / N (leave-one-out N = 9, R_i = class size - 1).
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    m = retrieval_metrics(np.ones((10, 4), np.float32), labels, recall_at=(1,), metrics=WITH_WHOLE)
    r = np.bincount(labels)[labels] - 1
    assert m["mean_average_precision"] == pytest.approx(np.mean(r / 9), rel=1e-12)
    assert m["mean_reciprocal_rank"] == pytest.approx(1 / 9, rel=1e-12)


@pytest.mark.parametrize("bad", [(1.5,), (True,), (0,), 2, ("1",)])
def test_recall_at_takes_integers_only(bad):
    x, labels = normalized(20, 4, 0), np.arange(20) % 4
    with pytest.raises(ConfigError, match="recall_at"):
        retrieval_metrics(x, labels, recall_at=bad)
    with pytest.raises(ConfigError, match="recall_at"):
        EvalSpec(recall_at=bad)


def test_whole_ranking_metrics_refuse_a_ranking_cut_short():
    x, labels = normalized(30, 4, 1), np.arange(30) % 5
    results = retrieve(x, labels)  # k = max R: not the whole ranking
    with pytest.raises(ConfigError, match="whole ranking"):
        per_query_scores(results, metrics=["mean_average_precision"])
    assert set(per_query_scores(results, metrics=["map_at_r"])) == {"map_at_r"}

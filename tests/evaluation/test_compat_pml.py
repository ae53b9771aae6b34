"""pytorch-metric-learning's own test cases (tests/utils/test_calculate_accuracies*.py, v2.9),
their inputs and expected values, on gspdml: the drop-in
:class:`gspdml.evaluation.compat.AccuracyCalculator` and, for the case PML states as neighbour
labels, the registered metrics on a search truncated at k (:func:`metrics_from_results`)."""

import math

import numpy as np
import pytest
import torch
from pytorch_metric_learning.utils import accuracy_calculator as pml
from sklearn.cluster import KMeans
from sklearn.metrics import adjusted_mutual_info_score, normalized_mutual_info_score

from gspdml.errors import ConfigError
from gspdml.evaluation import RetrievalResults
from gspdml.evaluation.compat import AccuracyCalculator
from gspdml.evaluation.metrics import metrics_from_results

KNN = ("precision_at_1", "r_precision", "mean_average_precision_at_r", "mean_average_precision")
KNN_MRR = (*KNN, "mean_reciprocal_rank")

# --- PML's neighbour-label case (TestCalculateAccuracies.test_accuracy_calculator) --------------

QUERY_LABELS = [1, 1, 2, 3, 4, 0]
KNN_LABELS = [
    [0, 1, 1, 2, 2],
    [1, 0, 1, 1, 3],
    [4, 4, 4, 4, 2],
    [3, 1, 3, 1, 3],
    [0, 0, 4, 2, 2],
    [1, 2, 3, 4, 5],
]
LABEL_COUNTS = {0: 2, 1: 3, 2: 5, 3: 4, 4: 5}
#: PML's expected value of each query (rows as QUERY_LABELS), without and with the query among
#: the references (then its first neighbour column is dropped and R_i = count - 1)
EXPECTED = {
    False: {
        "precision_at_1": [0, 1, 0, 1, 0, 0],
        "r_precision": [2 / 3, 2 / 3, 1 / 5, 2 / 4, 1 / 5, 0],
        "map_at_r": [
            (1 / 2 + 2 / 3) / 3,
            (1 + 2 / 3) / 3,
            (1 / 5) / 5,
            (1 + 2 / 3) / 4,
            (1 / 3) / 5,
            0,
        ],
        "map_at_k": [
            (1 / 2 + 2 / 3) / 3,
            (1 + 2 / 3 + 3 / 4) / 3,
            (1 / 5) / 5,
            (1 + 2 / 3 + 3 / 5) / 4,
            (1 / 3) / 5,
            0,
        ],
        "mrr_at_k": [1 / 2, 1, 1 / 5, 1, 1 / 3, 0],
    },
    True: {
        "precision_at_1": [1, 0, 0, 0, 0, 0],
        "r_precision": [1, 1 / 2, 1 / 4, 1 / 3, 1 / 4, 0],
        "map_at_r": [1, (1 / 2) / 2, (1 / 4) / 4, (1 / 2) / 3, (1 / 2) / 4, 0],
        "map_at_k": [1, (1 / 2 + 2 / 3) / 2, (1 / 4) / 4, (1 / 2 + 2 / 4) / 3, (1 / 2) / 4, 0],
        "mrr_at_k": [1, 1 / 2, 1 / 4, 1 / 2, 1 / 2, 0],
    },
}


def results_of_neighbour_labels(ref_includes_query):
    """A search whose neighbours carry PML's labels: the references hold LABEL_COUNTS[L] rows of
    each label L (and a row of any other label listed), each query lists distinct rows of the
    given labels and, with the query among the references, leaves out one more of its own."""
    knn_labels = [row[1:] if ref_includes_query else row for row in KNN_LABELS]
    counts = dict(LABEL_COUNTS)
    counts.update({lab: 1 for row in knn_labels for lab in row if lab not in counts})
    reference_labels = [lab for lab, c in counts.items() for _ in range(c)]
    rows_of = {lab: [i for i, v in enumerate(reference_labels) if v == lab] for lab in counts}
    indices, excluded = [], []
    for label, row in zip(QUERY_LABELS, knn_labels):
        free = {lab: list(rows) for lab, rows in rows_of.items()}
        indices.append([free[lab].pop(0) for lab in row])
        if ref_includes_query:
            excluded.append(free[label].pop(0))
    k = len(knn_labels[0])
    distances = torch.arange(k, dtype=torch.float64).expand(len(QUERY_LABELS), k)
    return RetrievalResults.from_labels(
        torch.tensor(indices),
        distances,
        QUERY_LABELS,
        reference_labels,
        excluded=torch.tensor(excluded) if ref_includes_query else None,
    )


@pytest.mark.parametrize("ref_includes_query", [False, True])
def test_pml_neighbour_label_case_on_a_search_truncated_at_k(ref_includes_query):
    results = results_of_neighbour_labels(ref_includes_query)
    k = results.k
    names = ("precision_at_1", "r_precision", "map_at_r", "map_at_k", "mrr_at_k")
    m = metrics_from_results(
        results, recall_at=(k,), metrics=names, class_average=True, per_class=True
    )
    expected = EXPECTED[ref_includes_query]
    classes = sorted(set(QUERY_LABELS))

    def value(metrics, name):
        return metrics[name][k] if isinstance(metrics[name], dict) else metrics[name]

    for name in names:
        got = value(m, name)
        assert got == pytest.approx(np.mean(expected[name]), rel=1e-6), name
        per_label = [
            np.mean([v for v, lab in zip(expected[name], QUERY_LABELS) if lab == c])
            for c in classes
        ]
        got = value(m["class_averaged"], name)
        assert got == pytest.approx(np.mean(per_label), rel=1e-6), name
        for c, mean in zip(classes, per_label):
            got = value(m["per_class"][c], name)
            assert got == pytest.approx(mean, rel=1e-6), (name, c)


# --- PML's embedding cases (TestCalculateAccuraciesAndFaiss, TestEmbeddingsComeFromSameSource) ---


def as_input(x, use_numpy):
    return np.asarray(x) if use_numpy else torch.as_tensor(np.asarray(x))


@pytest.mark.parametrize("use_numpy", [True, False])
def test_pml_faiss_case(use_numpy):
    calc = AccuracyCalculator(exclude=("NMI", "AMI"))
    points = np.arange(10)[:, None]
    acc = calc.get_accuracy(
        as_input(points, use_numpy),
        as_input(np.arange(10), use_numpy),
        as_input(points, use_numpy),
        as_input(np.arange(10), use_numpy),
        False,
    )
    for name in KNN:
        assert acc[name] == pytest.approx(1, rel=1e-6), name
    # the references: the 10 queries, then 0.5, 1.5, ..., 9.5 labelled 1 (float labels)
    reference = np.concatenate([np.arange(10), np.arange(10) + 0.5])[:, None]
    reference_labels = np.concatenate([np.arange(10), np.ones(10)]).astype(np.float32)
    acc = calc.get_accuracy(
        as_input(points, use_numpy),
        as_input(np.arange(10), use_numpy),
        as_input(reference, use_numpy),
        as_input(reference_labels, use_numpy),
        True,
    )
    assert acc["precision_at_1"] == pytest.approx(1, rel=1e-6)
    assert acc["r_precision"] == pytest.approx(0.5, rel=1e-6)
    hits = [1, 2 / 2, 3 / 5, 4 / 7, 5 / 9, 6 / 11, 7 / 13, 8 / 15, 9 / 17, 10 / 19]
    assert acc["mean_average_precision_at_r"] == pytest.approx(sum(hits[:5]) / 10, rel=1e-6)
    assert acc["mean_average_precision"] == pytest.approx(sum(hits) / 10, rel=1e-6)


@pytest.mark.parametrize("use_numpy", [True, False])
def test_pml_avg_of_avgs_case(use_numpy):
    query, reference = np.arange(10)[:, None], np.arange(10)[:, None]
    query[-1], reference[0] = 100, -100
    query_labels, reference_labels = [0] * 9 + [1], [1] + [0] * 9
    args = [as_input(a, use_numpy) for a in (query, query_labels, reference, reference_labels)]
    acc = AccuracyCalculator(exclude=("NMI", "AMI")).get_accuracy(*args, False)
    for name in ("precision_at_1", "r_precision", "mean_average_precision_at_r"):
        assert acc[name] == pytest.approx(0.9, rel=1e-6), name
    assert acc["mean_average_precision"] == pytest.approx(0.9 + 0.01, rel=1e-6)
    acc = AccuracyCalculator(exclude=("NMI", "AMI"), avg_of_avgs=True).get_accuracy(*args, False)
    for name in ("precision_at_1", "r_precision", "mean_average_precision_at_r"):
        assert acc[name] == pytest.approx(0.5, rel=1e-6), name
    assert acc["mean_average_precision"] == pytest.approx((1 + 0.1) / 2, rel=1e-6)


def test_pml_tied_distances_remove_the_query_itself():
    emb, labels = torch.tensor([[10.0], [10.0], [20.0], [20.0]]), torch.tensor([1, 0, 1, 0])
    acc = AccuracyCalculator(include=("precision_at_1",)).get_accuracy(emb, labels)
    assert acc == {"precision_at_1": 0}


def test_pml_many_tied_distances():
    labels = torch.randint(0, 2, size=(10000,), generator=torch.Generator().manual_seed(0))
    calc = AccuracyCalculator(include=("precision_at_1",), k=1)
    acc = calc.get_accuracy(torch.zeros(10000, 2), labels)
    assert acc["precision_at_1"] == pytest.approx(0.5, rel=0.1)
    # exact ties go to the lowest index: every query's neighbour is row 0 (row 1 for row 0)
    first = torch.where(torch.arange(10000) == 0, labels[1], labels[0])
    assert acc["precision_at_1"] == pytest.approx((labels == first).double().mean().item())


def test_pml_query_within_reference():
    query, ref = torch.tensor([[0.0], [10.0], [20.0]]), torch.tensor([[0.0], [5], [10], [15], [20]])
    query_labels, ref_labels = torch.tensor([0, 1, 2]), torch.tensor([0, 9, 1, 8, 2])
    calc = AccuracyCalculator(include=("precision_at_1",))
    calc.get_accuracy(query, query_labels, ref, ref_labels, False)
    with pytest.raises(ValueError):
        calc.get_accuracy(query, query_labels, ref, ref_labels, True)
    ref = torch.tensor([[0.0], [10], [20], [5], [15]])
    ref_labels[:3] = query_labels
    acc = calc.get_accuracy(query, query_labels, ref, ref_labels, True)
    theirs = pml.AccuracyCalculator(include=("precision_at_1",), device=torch.device("cpu"))
    assert acc == theirs.get_accuracy(query, query_labels, ref, ref_labels, True)


@pytest.mark.parametrize("k", [-1, 0, 1.5, "max"])
def test_pml_invalid_k(k):
    with pytest.raises(ValueError):
        AccuracyCalculator(k=k)


def test_pml_avg_of_avgs_and_return_per_class_exclude_each_other():
    with pytest.raises(ValueError):
        AccuracyCalculator(avg_of_avgs=True, return_per_class=True)


def test_no_query_with_a_relevant_reference_gives_pml_nan():
    # PML's second case: every query label is missing from the references
    q, r = torch.randn(6, 3), torch.randn(8, 3)
    q_labels, r_labels = torch.tensor([1, 1, 2, 3, 4, 0]), torch.arange(8) + 5
    acc = AccuracyCalculator(exclude=("NMI", "AMI")).get_accuracy(q, q_labels, r, r_labels)
    assert set(acc) == set(KNN_MRR) and all(math.isnan(v) for v in acc.values())
    per_class = AccuracyCalculator(exclude=("NMI", "AMI"), return_per_class=True)
    acc = per_class.get_accuracy(q, q_labels, r, r_labels)
    theirs = pml.AccuracyCalculator(
        exclude=("NMI", "AMI"), return_per_class=True, device=torch.device("cpu")
    ).get_accuracy(q, q_labels, r, r_labels)
    for name in KNN_MRR:
        assert len(acc[name]) == len(theirs[name]) == 5 and all(map(math.isnan, acc[name]))


def test_unsupported_pml_arguments_are_named():
    for name in ("label_comparison_fn", "knn_func", "kmeans_func"):
        with pytest.raises(ConfigError, match=name):
            AccuracyCalculator(**{name: lambda *a: None})
    with pytest.raises(ConfigError, match="label_comparison_fn"):
        AccuracyCalculator().get_accuracy(torch.randn(4, 2), torch.zeros(4, 2))


# --- PML's large-k case (test_calculate_accuracies_large_k.py), against PML itself ---------------


@pytest.mark.parametrize("ref_includes_query", [False, True])
@pytest.mark.parametrize("k", [pytest.param(None, marks=pytest.mark.slow), 98, "max_bin_count"])
def test_pml_large_k_case_equals_pml(ref_includes_query, k):
    rng = np.random.default_rng(493)
    for num_classes in (2, 11, 103):
        encs = rng.random((1000, 5), dtype=np.float32)  # random features: no ties
        labels = rng.integers(0, num_classes, size=1000)
        ours = AccuracyCalculator(k=k, exclude=("NMI", "AMI"))
        theirs = pml.AccuracyCalculator(k=k, exclude=("NMI", "AMI"), device=torch.device("cpu"))
        a = ours.get_accuracy(encs, labels, encs, labels, ref_includes_query)
        b = theirs.get_accuracy(encs, labels, encs, labels, ref_includes_query)
        assert list(a) == list(b)
        for name in a:
            assert a[name] == pytest.approx(b[name], abs=1e-5), (name, num_classes)


# --- PML's mutual-information case (TestMutualInformation) ----------------------------------------


@pytest.mark.parametrize("offset", [0.5, 1])
def test_pml_mutual_information_case(offset):
    g = torch.Generator().manual_seed(2)
    emb = torch.cat(
        [torch.randn(2000, 32, generator=g), torch.randn(2000, 32, generator=g) + offset]
    )
    labels = torch.cat([torch.zeros(2000), torch.ones(2000)])
    acc = AccuracyCalculator(include=("AMI", "NMI")).get_accuracy(emb, labels, emb, labels, False)
    clusters = KMeans(n_clusters=2, n_init=10, random_state=0).fit_predict(emb.numpy())
    assert list(acc) == ["AMI", "NMI"]
    assert acc["AMI"] == pytest.approx(adjusted_mutual_info_score(labels, clusters), rel=1e-1)
    assert acc["NMI"] == pytest.approx(normalized_mutual_info_score(labels, clusters), rel=1e-1)

"""open-metric-learning's own test cases for its functional retrieval metrics
(tests/test_oml/test_functional/test_metrics/, and the examples of oml/functional/metrics.py),
their inputs and expected values, on gspdml: the drop-in
:func:`gspdml.evaluation.compat.calc_retrieval_metrics` and the registered metrics
(``recall_at`` = cmc@k, ``precision_capped_at_k`` = precision@k, ``map_hits_at_k`` = map@k) on a
search truncated at k; and a slow loop of OML's definitions on random truncated lists."""

import math
import random

import numpy as np
import pytest
import torch

from gspdml.evaluation import RetrievalResults
from gspdml.evaluation.compat import calc_retrieval_metrics, flatten_dict
from gspdml.evaluation.metrics import per_query_scores

# --- OML's exact case: 6 queries (labels 0, 0, 0, 0, 1, 1) against the 5 others ---------------
#: the positions (0-based) of each query's relevant items among its 5 ranked ones
POSITIONS = [[0, 1, 3], [0, 3, 4], [1, 2, 4], [2, 3, 4], [0], [3]]
LABELS = [0, 0, 0, 0, 1, 1]
TOP_K = (1, 2, 3, 4, 5, 10)
EXPECTED = {
    "cmc": {
        1: [1, 1, 0, 0, 1, 0],
        2: [1, 1, 1, 0, 1, 0],
        3: [1, 1, 1, 1, 1, 0],
        4: [1, 1, 1, 1, 1, 1],
        5: [1, 1, 1, 1, 1, 1],
        10: [1, 1, 1, 1, 1, 1],
    },
    "precision": {
        1: [1, 1, 0, 0, 1, 0],
        2: [1, 0.5, 0.5, 0, 1, 0],
        3: [2 / 3, 1 / 3, 2 / 3, 1 / 3, 1, 0],
        4: [1, 2 / 3, 2 / 3, 2 / 3, 1, 1],
        5: [1, 1, 1, 1, 1, 1],
        10: [1, 1, 1, 1, 1, 1],
    },
    "map": {
        1: [1, 1, 0, 0, 1, 0],
        2: [1, 1, 1 / 2, 0, 1, 0],
        3: [1, 1, 7 / 12, 1 / 3, 1, 0],
        4: [11 / 12, 3 / 4, 7 / 12, 5 / 12, 1, 1 / 4],
        5: [11 / 12, 21 / 30, 53 / 90, 43 / 90, 1, 1 / 4],
        10: [11 / 12, 21 / 30, 53 / 90, 43 / 90, 1, 1 / 4],
    },
}
OURS = {"cmc": "recall_at", "precision": "precision_capped_at_k", "map": "map_hits_at_k"}


def test_oml_exact_case_with_the_drop_in_call():
    retrieved = [torch.arange(5) for _ in POSITIONS]
    gt = [torch.tensor(p) for p in POSITIONS]
    per_query = calc_retrieval_metrics(
        retrieved, gt, cmc_top_k=TOP_K, precision_top_k=TOP_K, map_top_k=TOP_K, reduce=False
    )
    reduced = calc_retrieval_metrics(
        retrieved, gt, cmc_top_k=TOP_K, precision_top_k=TOP_K, map_top_k=TOP_K
    )
    for name, by_k in EXPECTED.items():
        for k, values in by_k.items():
            assert per_query[name][k].tolist() == pytest.approx(values, abs=1e-4), (name, k)
            assert float(reduced[name][k]) == pytest.approx(np.mean(values), abs=1e-4)
    flat = flatten_dict(reduced)
    assert flat["cmc/1"] == reduced["cmc"][1] and flat["map/5"] == reduced["map"][5]
    assert flat["precision/5"] == reduced["precision"][5]


def test_oml_exact_case_on_a_leave_one_out_search():
    # The same case as a search of the 5 other rows of each query, ranked as POSITIONS says.
    indices = []
    for i, positions in enumerate(POSITIONS):
        others = [j for j in range(6) if j != i]
        same = [j for j in others if LABELS[j] == LABELS[i]]
        different = [j for j in others if LABELS[j] != LABELS[i]]
        indices.append([same.pop(0) if p in positions else different.pop(0) for p in range(5)])
    results = RetrievalResults.from_labels(
        torch.tensor(indices),
        torch.arange(5.0).expand(6, 5),
        LABELS,
        LABELS,
        excluded=torch.arange(6),
    )
    scores = per_query_scores(results, TOP_K, list(OURS.values()))
    stems = {"cmc": "recall_at", "precision": "precision_capped_at", "map": "map_hits_at"}
    for name, by_k in EXPECTED.items():
        for k, values in by_k.items():
            got = scores[f"{stems[name]}_{k}"]
            assert got.tolist() == pytest.approx(values, abs=1e-4), (name, k)


def test_oml_categories_case():
    args = {
        "retrieved_ids": [
            torch.tensor([0, 5, 4]),
            torch.tensor([2, 1, 5]),
            torch.tensor([2, 1, 5]),
        ],
        "gt_ids": [torch.tensor([0, 10, 4]), torch.tensor([2, 3]), torch.tensor([2, 3])],
        "cmc_top_k": (1,),
        "precision_top_k": (3, 5),
        "map_top_k": (),
    }
    overall = (2 / 3 + 2 * 1 / 2) / 3
    m = calc_retrieval_metrics(query_categories=None, **args)
    assert set(m) == {"cmc", "precision"} and float(m["cmc"][1]) == 1.0
    assert float(m["precision"][3]) == pytest.approx(overall, abs=1e-6)
    assert float(m["precision"][5]) == pytest.approx(overall, abs=1e-6)
    m = calc_retrieval_metrics(query_categories=np.array(["cat", "dog", "dog"]), **args)
    assert set(m) == {"OVERALL", "cat", "dog"}
    assert float(m["OVERALL"]["precision"][5]) == pytest.approx(overall, abs=1e-6)
    assert float(m["cat"]["precision"][3]) == pytest.approx(2 / 3, abs=1e-6)
    assert float(m["dog"]["precision"][5]) == pytest.approx(1 / 2, abs=1e-6)
    assert float(m["dog"]["cmc"][1]) == 1.0


def test_oml_empty_predictions():
    retrieved = [torch.tensor([], dtype=torch.long)] * 3
    gt = [torch.tensor([0]), torch.tensor([], dtype=torch.long), torch.tensor([10, 20])]
    m = calc_retrieval_metrics(
        retrieved, gt, cmc_top_k=(3,), precision_top_k=(2,), map_top_k=(1,), reduce=False
    )
    for name, k in (("cmc", 3), ("precision", 2), ("map", 1)):
        assert m[name][k].tolist() == [0.0, 1.0, 0.0]


@pytest.mark.parametrize("top_k", [(), (0, -1), (0,), (1.5, 2), (1.0, 2.0)])
@pytest.mark.parametrize("field", ["cmc_top_k", "precision_top_k", "map_top_k"])
def test_oml_invalid_top_k(top_k, field):
    with pytest.raises(ValueError):
        calc_retrieval_metrics([torch.arange(5)] * 2, [torch.tensor([1])] * 2, **{field: (top_k,)})


def gt_case(gt_tops, n_gts):
    """OML's docstring examples give correctness flags and relevant counts: retrieved ids 0..n-1,
    relevant ids the flagged ones plus unretrieved ids up to the count."""
    retrieved = [torch.arange(len(t)) for t in gt_tops]
    gt = [
        torch.tensor([j for j, hit in enumerate(t) if hit] + [1000 + j for j in range(n - sum(t))])
        for t, n in zip(gt_tops, n_gts)
    ]
    return retrieved, gt


def test_oml_docstring_examples():
    tops = [[1, 0], [0, 1, 1], [0, 0], []]
    m = calc_retrieval_metrics(*gt_case(tops, [2, 2, 1, 0]), cmc_top_k=(1, 2), reduce=False)
    assert m["cmc"][1].tolist() == [1, 0, 0, 1] and m["cmc"][2].tolist() == [1, 1, 0, 1]
    m = calc_retrieval_metrics(*gt_case(tops, [2, 3, 5, 2]), precision_top_k=(1, 2), reduce=False)
    assert m["precision"][1].tolist() == [1, 0, 0, 0]
    assert m["precision"][2].tolist() == pytest.approx([0.5, 0.5, 0, 0])
    tops = [[1, 0], [0, 1], [0, 0, 0, 0], []]
    m = calc_retrieval_metrics(*gt_case(tops, [1, 1, 2, 0]), map_top_k=(1, 2), reduce=False)
    assert m["map"][1].tolist() == [1, 0, 0, 1] and m["map"][2].tolist() == [1, 0.5, 0, 1]


def slow_oml(retrieved, gt, k):
    """OML's three definitions, one query at a time (module docstring of compat.oml)."""
    out = {"cmc": [], "precision": [], "map": []}
    for r, g in zip(retrieved, gt):
        r, g = r.tolist(), set(g.tolist())
        if not r:
            for name in out:
                out[name].append(1.0 if not g else 0.0)
            continue
        rel = [int(x in g) for x in r[:k]]
        kk = len(rel)
        out["cmc"].append(float(any(rel)))
        out["precision"].append(sum(rel) / min(kk, len(g)) if g else math.nan)
        hits = sum(rel)
        precisions = [sum(rel[: j + 1]) / (j + 1) for j in range(kk) if rel[j]]
        out["map"].append(sum(precisions) / hits if hits else 0.0)
    return out


@pytest.mark.parametrize("seed", range(3))
def test_random_truncated_lists_equal_a_slow_loop_of_oml_definitions(seed):
    rnd = random.Random(seed)
    retrieved, gt = [], []
    for _ in range(60):
        gallery = list(range(30))
        rnd.shuffle(gallery)
        retrieved.append(torch.tensor(gallery[: rnd.randint(0, 12)], dtype=torch.long))
        gt.append(torch.tensor(rnd.sample(range(30), rnd.randint(0, 8)), dtype=torch.long))
    top_k = (1, 3, 5, 20)
    m = calc_retrieval_metrics(
        retrieved, gt, cmc_top_k=top_k, precision_top_k=top_k, map_top_k=top_k, reduce=False
    )
    for k in top_k:
        expected = slow_oml(retrieved, gt, k)
        for name, values in expected.items():
            assert m[name][k].tolist() == pytest.approx(values, abs=1e-6, nan_ok=True), (name, k)

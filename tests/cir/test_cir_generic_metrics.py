"""The official metrics of Fashion-IQ, CIRR and CIRCO (gspdml.cir.generic_metrics): hand-computed
tiny cases, and the whole evaluation against slow loops written from the definitions (a sort by
(-score, database index), the excluded images dropped, plain Python sums)."""

from functools import partial

import numpy as np
import pytest
import torch

from gspdml.cir.composition_protocol import evaluate_protocol
from gspdml.cir.generic_datasets import GenericProtocol, GenericQuery
from gspdml.cir.generic_metrics import (
    evaluate_generic,
    exclude,
    map_at_k,
    recall_hit_at_k,
    recall_subset_at_k,
)


def test_recall_is_a_hit_in_the_top_k():
    ranked = torch.tensor([[False, True, False], [False, False, True], [True, True, False]])
    got = recall_hit_at_k(ranked, (1, 2, 3))
    assert got[1].tolist() == [0.0, 0.0, 1.0]
    assert got[2].tolist() == [1.0, 0.0, 1.0]
    assert got[3].tolist() == [1.0, 1.0, 1.0]


def test_map_at_k_by_hand():
    # positives at ranks 1 and 3 (P = 2); and at ranks 2, 5, 6 (P = 3)
    ranked = torch.tensor(
        [[True, False, True, False, False, False], [False, True, False, False, True, True]]
    )
    got = map_at_k(ranked, (1, 2, 3, 5, 6))
    assert got[1].tolist() == pytest.approx([1.0, 0.0])
    assert got[2].tolist() == pytest.approx([0.5, 0.5 / 2])
    assert got[3].tolist() == pytest.approx([(1 + 2 / 3) / 2, 0.5 / 3])
    assert got[5].tolist() == pytest.approx([(1 + 2 / 3) / 2, (1 / 2 + 2 / 5) / 3])
    assert got[6].tolist() == pytest.approx([(1 + 2 / 3) / 2, (1 / 2 + 2 / 5 + 3 / 6) / 3])


def test_recall_subset_by_hand():
    scores = torch.tensor([[0.9, 0.1, 0.8, 0.5, 0.7, 0.3]])
    # subset {1, 2, 4, 5}, target 4: above it in the subset only 2 (0.8) -> second place
    query = GenericQuery(0, "t", np.array([4]), subset=np.array([1, 2, 4, 5]))
    got = recall_subset_at_k(scores, [query], (1, 2, 3))
    assert [got[k].item() for k in (1, 2, 3)] == [0.0, 1.0, 1.0]
    # a tie with an earlier database index ranks first (stable order)
    tied = torch.tensor([[0.0, 0.5, 0.5, 0.0, 0.0, 0.0]])
    query = GenericQuery(0, "t", np.array([2]), subset=np.array([1, 2]))
    assert recall_subset_at_k(tied, [query], (1,))[1].item() == 0.0


def test_excluded_images_are_not_ranked():
    scores = torch.tensor([[0.9, 0.2, 0.5]])
    query = GenericQuery(0, "t", np.array([2]), excluded=np.array([0]))
    masked = exclude(scores, [query])
    assert masked[0, 0] == float("-inf") and scores[0, 0] == 0.9
    ranked = torch.tensor([[False, False, True]])[:, torch.argsort(-masked[0], stable=True)]
    assert recall_hit_at_k(ranked, (1,))[1].item() == 1.0


# --------------------------------------------------------------- against slow reference loops
def slow_metrics(scores, query, recall_at, subset_at, map_at):
    """One query's metrics from the definitions."""
    excluded = set(query.excluded.tolist())
    order = sorted(
        (j for j in range(len(scores)) if j not in excluded), key=lambda j: (-scores[j], j)
    )
    positives = set(query.positives.tolist())
    out = {}
    for k in recall_at:
        out[f"recall@{k}"] = float(any(j in positives for j in order[:k]))
    target = int(query.positives[0])
    subset = [j for j in order if j in set(query.subset.tolist())]
    for k in subset_at:
        out[f"recall_subset@{k}"] = float(target in subset[:k])
    for k in map_at:
        hits, total = 0, 0.0
        for rank, j in enumerate(order[:k], 1):
            if j in positives:
                hits += 1
                total += hits / rank
        out[f"map@{k}"] = total / min(len(positives), k)
    # the trapezoid AP over the whole ranking (Radenović et al.), 0-based ranks r_j
    ranks = [r for r, j in enumerate(order) if j in positives]
    ap = 0.0
    for i, r in enumerate(ranks):
        before = 1.0 if r == 0 else i / r
        ap += (before + (i + 1) / (r + 1)) / 2 / len(ranks)
    out["map"] = ap
    return out


@pytest.mark.parametrize("benchmark", ["fashioniq", "cirr", "circo"])
def test_evaluate_generic_equals_slow_loops(benchmark, monkeypatch):
    rng = np.random.default_rng({"fashioniq": 0, "cirr": 1, "circo": 2}[benchmark])
    size, count = 30, 23
    protocol = GenericProtocol([f"x{i}" for i in range(size)], [], benchmark=benchmark)
    groups = ("dress", "shirt", "toptee") if benchmark == "fashioniq" else (benchmark,)
    for q in range(count):
        group = groups[q % len(groups)]
        excluded, subset = np.zeros(0, np.int64), np.zeros(0, np.int64)
        if benchmark == "fashioniq":  # a category's gallery: ten images
            g = groups.index(group)
            excluded = np.setdiff1d(np.arange(size), np.arange(10 * g, 10 * g + 10))
            positives = np.array([10 * g + int(rng.integers(10))])
        elif benchmark == "cirr":
            members = rng.choice(size, size=6, replace=False)
            excluded, positives, subset = members[:1], members[1:2], members[1:]
        else:
            positives = np.sort(rng.choice(size, size=int(rng.integers(1, 6)), replace=False))
        protocol.query_images.append(f"q{q}")
        protocol.queries.append(GenericQuery(q, f"t{q}", positives, group, excluded, subset))
    # integer scores: many ties, settled by database order
    table = torch.from_numpy(rng.integers(0, 6, size=(count, size)).astype(np.float32))
    result = evaluate_generic(protocol, lambda idx, texts: table[idx], ap="trapezoid")
    recall_at = {"fashioniq": (10, 50), "cirr": (1, 5, 10, 50), "circo": ()}[benchmark]
    subset_at = (1, 2, 3) if benchmark == "cirr" else ()
    map_at = (5, 10, 25, 50) if benchmark == "circo" else ()
    slow = [
        slow_metrics(table[q].tolist(), query, recall_at, subset_at, map_at)
        for q, query in enumerate(protocol.queries)
    ]
    names = slow[0].keys()
    assert set(names) - {"map"} and set(result) >= set(names)
    for group in groups:
        rows = [s for s, q in zip(slow, protocol.queries) if q.group == group]
        for name in names:
            want = 100 * sum(r[name] for r in rows) / len(rows)
            assert result["groups"][group][name] == pytest.approx(want, abs=1e-9), (group, name)
    for name in names:
        mean = sum(result["groups"][g][name] for g in groups) / len(groups)
        assert result[name] == pytest.approx(mean, abs=1e-9)
    # scored in chunks of 5 queries, each chunk's official metrics are its own queries'
    monkeypatch.setattr(
        "gspdml.cir.generic_metrics.evaluate_protocol", partial(evaluate_protocol, chunk=5)
    )
    again = evaluate_generic(protocol, lambda idx, texts: table[idx], ap="trapezoid")
    for group in groups:
        assert again["groups"][group] == pytest.approx(result["groups"][group], abs=1e-9)

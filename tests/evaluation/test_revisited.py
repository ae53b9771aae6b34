"""The revisited Oxford and Paris mAP (gspdml.evaluation.revisited) against a slow reference
written out here: rank the database, walk it skipping the removed images, and average the
trapezoidal precision at each positive (Radenović et al., CVPR 2018)."""

import math

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.revisited import PROTOCOLS, revisited_average_precision, revisited_map


def slow_ap(scores, query, protocol):
    positives_of, removed_of = PROTOCOLS[protocol]
    positives = {i for label in positives_of for i in query.get(label, [])}
    removed = {i for label in removed_of for i in query.get(label, [])} - positives
    if not positives:
        return math.nan
    ranking = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    kept = [i for i in ranking if i not in removed]
    total, found = 0.0, 0
    for rank, image in enumerate(kept):
        if image in positives:
            before = 1.0 if rank == 0 else found / rank
            found += 1
            total += (before + found / (rank + 1)) / 2
    return total / len(positives)


def _tree(seed, queries=7, database=30):
    """Random scores (with ties) and random disjoint easy / hard / junk sets per query, one
    query without easy images and one without any positive."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 12, size=(queries, database)).astype(np.float64)
    truth = []
    for q in range(queries):
        labels = rng.choice(4, size=database, p=[0.55, 0.2, 0.15, 0.1])
        query = {name: np.flatnonzero(labels == k).tolist() for k, name in
                 ((1, "easy"), (2, "hard"), (3, "junk"))}  # fmt: skip
        if q == 1:
            query["easy"] = []
        if q == 2:
            query["easy"], query["hard"] = [], []
        truth.append(query)
    return scores, truth


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_every_query_equals_the_slow_reference(seed, protocol):
    scores, truth = _tree(seed)
    got = revisited_average_precision(torch.tensor(scores), truth, protocol).numpy()
    want = np.array([slow_ap(scores[q], truth[q], protocol) for q in range(len(truth))])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert revisited_map(torch.tensor(scores), truth, protocol) == pytest.approx(np.nanmean(want))


def test_junk_is_removed_not_counted_as_negative():
    """One positive ranked third behind a junk image: medium removes the junk (AP of rank 1),
    and under easy the hard image ahead is removed too."""
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.1]])
    query = {"junk": [0], "hard": [1], "easy": [2]}
    # medium: ranking hard(1), easy(2) after removing junk -> both positives at ranks 0, 1
    assert revisited_map(scores, [query], "medium") == pytest.approx(1.0)
    assert revisited_map(scores, [query], "easy") == pytest.approx(1.0)  # hard removed too
    # hard: easy is removed, the hard image ranks first
    assert revisited_map(scores, [query], "hard") == pytest.approx(1.0)
    # without the removal the easy image would rank third: AP (2/2 ... ) < 1
    assert revisited_map(scores, [{"easy": [2]}], "easy") < 1.0


def test_bad_input_is_named():
    with pytest.raises(ConfigError, match="unknown protocol"):
        revisited_map(torch.zeros(1, 2), [{"easy": [0]}], "medium-hard")
    with pytest.raises(ConfigError, match="outside the 2 database images"):
        revisited_map(torch.zeros(1, 2), [{"easy": [5]}], "easy")
    with pytest.raises(ConfigError, match="no query has a positive"):
        revisited_map(torch.zeros(1, 2), [{"junk": [0]}], "easy")

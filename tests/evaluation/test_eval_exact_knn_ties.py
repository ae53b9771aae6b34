"""Exact kNN on tied and near-tied embeddings: the float64 brute-force answer (ordered by
distance, then index), found with work linear in N k (no exhaustive fallback)."""

import math

import pytest
import torch

from gspdml.evaluation import KnnStats, knn
from gspdml.evaluation.exact_knn import _identical_rows
from tests.helpers.knn_reference import brute_force

PATTERNS = ("equal", "two", "duplicated", "collapsed")


def tie_pattern(name, n, dim=16, seed=0):
    """n unit rows: all equal; two distinct points; each of ~n / 2.5 points 2-3 times (shuffled);
    one point plus noise of norm ~1e-4 (a collapsed model)."""
    g = torch.Generator().manual_seed(seed)
    points = torch.nn.functional.normalize(torch.randn(max(2, n), dim, generator=g), dim=1)
    if name == "equal":
        return points[:1].repeat(n, 1)
    if name == "two":
        return points[torch.randint(0, 2, (n,), generator=g)]
    if name == "duplicated":
        copies = torch.randint(2, 4, (n,), generator=g)
        rows = torch.repeat_interleave(torch.arange(n), copies)[:n]
        return points[rows[torch.randperm(n, generator=g)]]
    noise = 1e-4 / math.sqrt(dim) * torch.randn(n, dim, generator=g)
    return torch.nn.functional.normalize(points[:1] + noise, dim=1)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("k", [1, 9, 40])
@pytest.mark.parametrize("leave_one_out", [True, False])
def test_tie_patterns_equal_brute_force(pattern, k, leave_one_out):
    x = tie_pattern(pattern, 240)
    q, r = (x, None) if leave_one_out else (x[::3], x)
    d_ref, i_ref = brute_force(q, r, k)
    d, i = knn(q, r, k, memory_budget=40_000)
    assert torch.equal(i, i_ref)
    torch.testing.assert_close(d, d_ref, rtol=1e-12, atol=1e-20)


@pytest.mark.parametrize("leave_one_out", [True, False])
def test_exact_ties_between_distinct_vectors_are_merged_by_index(leave_one_out):
    # The origin, +-e_j and +-2 e_j, each twice, shuffled: from the origin every +-e_j is at
    # squared distance exactly 1, so runs of equal distance span several groups.
    eye = torch.eye(5, dtype=torch.float64)
    base = torch.cat([torch.zeros(1, 5, dtype=torch.float64), eye, -eye, 2 * eye, -2 * eye])
    x = base.repeat(2, 1)[torch.randperm(2 * len(base), generator=torch.Generator().manual_seed(1))]
    q, r = (x, None) if leave_one_out else (x[:7], x)
    for k in (3, 12, 30):
        d_ref, i_ref = brute_force(q, r, k)
        d, i = knn(q, r, k)
        assert torch.equal(i, i_ref)
        assert torch.equal(d, d_ref)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_tie_patterns_do_work_linear_in_n_k(pattern):
    """At most c = 4 times N (k + pad) candidate pairs and N (k + 4) float64 distances (plus the
    distinct vectors' searches): the exhaustive fallback that tied rows used to take lists
    about N^2 pairs."""
    n, k, pad = 1500, 10, 16
    x = tie_pattern(pattern, n)
    stats = KnnStats()
    d, i = knn(x, None, k, pad=pad, stats=stats)
    assert stats.candidates <= 4 * n * (k + pad)
    assert stats.exact_distances <= 4 * n * (k + 4)
    assert torch.equal(i, brute_force(x, None, k)[1])


@pytest.mark.parametrize("pattern", ["equal", "two", "duplicated"])
def test_identical_references_are_searched_once(pattern):
    x = tie_pattern(pattern, 300)
    stats = KnnStats()
    knn(x, None, 5, stats=stats)
    assert stats.distinct_references == len(torch.unique(x, dim=0))


def test_rows_sharing_a_hash_key_are_still_told_apart():
    # Copies of row 3 changed in one column each: whichever columns the key reads, some of
    # these rows differ from row 3 only in a column it does not read.
    g = torch.Generator().manual_seed(2)
    x = torch.randn(60, 40, generator=g)
    variants = x[3].repeat(40, 1)
    variants[torch.arange(40), torch.arange(40)] += 1.0
    x = torch.cat([x, variants, x[3:4], x[:5]])
    x[7, 0] = -0.0
    x[8] = x[7]
    x[8, 0] = 0.0  # equal by value
    groups = _identical_rows(x)
    expected = torch.unique(x, dim=0, return_inverse=True)[1]
    same = groups.of[:, None] == groups.of[None, :]
    assert torch.equal(same, expected[:, None] == expected[None, :])
    assert torch.equal(groups.first, torch.unique(groups.first))  # numbered by first occurrence
    assert bool((x[groups.first[groups.of]] == x).all())

"""Exact kNN: equality with a float64 full sort by (distance, index) for every block size."""

import sys

import numpy as np
import pytest
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation import knn, retrieve
from gspdml.evaluation.exact_knn import exact_squared_distances
from tests.helpers.knn_reference import brute_force


def with_duplicates(n, dim, seed, unit=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=g)
    if unit:  # equal norms: the search ranks by q.r alone
        x = torch.nn.functional.normalize(x, dim=1)
    x[5] = x[6]
    x[7] = x[6]
    x[n // 2 : n // 2 + 5] = x[0]
    return x


@pytest.mark.parametrize("leave_one_out", [True, False])
@pytest.mark.parametrize("budget", [2**30, 3_000, 1])
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("unit", [False, True])
def test_chunked_equals_brute_force(leave_one_out, budget, precision, unit):
    q = with_duplicates(50, 8, 0, unit)
    r = None if leave_one_out else with_duplicates(40, 8, 1, unit)
    d_ref, i_ref = brute_force(q, r, 9)
    d, i = knn(q, r, 9, memory_budget=budget, precision=precision)
    assert torch.equal(i, i_ref)
    torch.testing.assert_close(d, d_ref, rtol=1e-12, atol=1e-12)


def test_the_runs_resolved_precision_picks_the_candidate_dtype(monkeypatch):
    """knn takes the run's PrecisionChoice (resolved once, gspdml.compat.hardware) without
    resolving it again: bf16 runs the candidate matmul in bfloat16, fp32 in float32, and the
    result is the exact one either way."""
    from gspdml.compat import hardware

    monkeypatch.setattr(hardware, "auto_precision", lambda *_: pytest.fail("resolved again"))
    dtypes = []
    real_addmm = torch.addmm

    def spy(bias, a, b, **kw):
        dtypes.append(a.dtype)
        return real_addmm(bias, a, b, **kw)

    monkeypatch.setattr(torch, "addmm", spy)
    q = with_duplicates(50, 8, 0)
    d_ref, i_ref = brute_force(q, None, 9)
    for name, dtype in (("bf16", torch.bfloat16), ("fp32", torch.float32)):
        dtypes.clear()
        d, i = knn(q, None, 9, precision=hardware.PrecisionChoice(name, "the run's"))
        assert set(dtypes) == {dtype} and torch.equal(i, i_ref)
        torch.testing.assert_close(d, d_ref, rtol=1e-12, atol=1e-12)


def test_blocks_respect_the_memory_budget(monkeypatch):
    sizes = []
    real_addmm = torch.addmm

    def spy(bias, a, b, **kw):
        sizes.append(a.shape[0] * b.shape[1] * (a.element_size() + 4))
        return real_addmm(bias, a, b, **kw)

    monkeypatch.setattr(torch, "addmm", spy)
    q = torch.randn(400, 8)
    knn(q, None, 3, memory_budget=50_000, precision="fp32")
    assert sizes and max(sizes) <= 50_000
    assert sum(1 for s in sizes) > 4


def test_many_exact_ties_fall_back_to_exhaustive_search():
    q = torch.randn(6, 5).repeat(9, 1)  # every vector 9 times
    d_ref, i_ref = brute_force(q, None, 12)
    d, i = knn(q, None, 12, memory_budget=20_000, pad=1)
    assert torch.equal(i, i_ref)
    assert torch.equal(d[:, :8], torch.zeros(54, 8, dtype=torch.float64))


def test_faiss_backend_gives_the_same_answer():
    q = with_duplicates(200, 10, 2)
    for r in (None, with_duplicates(90, 10, 3)):
        _, i_ref = brute_force(q, r, 6)
        _, i = knn(q, r, 6, backend="faiss")
        assert torch.equal(i, i_ref)


def test_faiss_backend_missing_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)
    with pytest.raises(ConfigError, match=r"gspdml\[faiss\]"):
        knn(torch.randn(5, 3), None, 2, backend="faiss")


def test_exact_distances_do_not_depend_on_blocking():
    g = torch.Generator().manual_seed(4)
    q, r = (
        torch.randn(7, 33, generator=g, dtype=torch.float64),
        torch.randn(50, 33, generator=g, dtype=torch.float64),
    )
    cand = torch.randint(0, 50, (7, 20), generator=g)
    whole = exact_squared_distances(q, r, cand)
    pieces = torch.cat(
        [exact_squared_distances(q[i : i + 1], r, cand[i : i + 1], budget=1) for i in range(7)]
    )
    assert torch.equal(whole, pieces)
    torch.testing.assert_close(whole, ((q[:, None] - r[cand]) ** 2).sum(-1))


def test_retrieve_chooses_k_from_class_sizes():
    labels = np.array([3, 3, 3, 7, 7, 9])
    x = torch.randn(6, 4)
    res = retrieve(x, labels)
    assert res.k == 2 and res.r_max == 2
    assert res.num_relevant.tolist() == [2, 2, 2, 1, 1, 0]
    assert res.lone_queries.tolist() == [False] * 5 + [True]
    gallery_labels = np.array([3, 7, 7, 7, 1])
    res = retrieve(x, labels, torch.randn(5, 4), gallery_labels, min_k=4)
    assert res.num_relevant.tolist() == [1, 1, 1, 3, 3, 0] and res.k == 4


def test_large_integer_labels_are_not_rounded():
    labels = np.array([2**40, 2**40 + 1, 2**40, 2**40 + 1], dtype=np.int64)
    res = retrieve(torch.randn(4, 3), labels)
    assert res.num_relevant.tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"k": 0}, "k"),
        ({"k": 5}, "k"),
        ({"backend": "annoy"}, "backend"),
        ({"memory_budget": 0}, "memory_budget"),
        ({"precision": "int8"}, "precision"),
        ({"precision": "float32"}, "precision"),  # the one vocabulary: fp32, bf16 (auto)
    ],
)
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as err:
        knn(torch.randn(5, 3), None, **{"k": 2, **kwargs})
    assert err.value.field == field


def test_bad_inputs_are_rejected():
    with pytest.raises(ConfigError, match="query"):
        knn(torch.tensor([[float("nan"), 0.0]]), torch.randn(3, 2), 1)
    with pytest.raises(ConfigError, match="dimension"):
        knn(torch.randn(3, 2), torch.randn(3, 4), 1)
    with pytest.raises(ConfigError, match="floats"):
        retrieve(torch.randn(3, 2), np.array([0.0, 1.0, 1.0]))


@pytest.mark.parametrize("budget", [2**30, 24_000])
def test_two_level_selection_on_wide_blocks(budget):
    # 3,000 references: the grouped selection runs (with a 3000 % 32 remainder), in one column
    # block or in two of 1,500 columns.
    q = with_duplicates(30, 8, 5)
    r = with_duplicates(3000, 8, 6)
    r[100] = q[3]
    _, i_ref = brute_force(q, r, 5)
    _, i = knn(q, r, 5, memory_budget=budget, pad=3)
    assert torch.equal(i, i_ref)

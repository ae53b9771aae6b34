"""Exact kNN internals: the float32-certified re-ranking, the thresholded candidate pool and the
worker threads all give the float64 brute-force answer (ordered by distance, then index)."""

import pytest
import torch

from gspdml.evaluation import exact_knn
from gspdml.evaluation.exact_knn import knn
from tests.helpers.knn_reference import brute_force


def near_ties(n_far=30, n_close=12, dim=6, seed=0):
    """Queries 0-2 see references whose squared distances differ by ~1e-11 relative (float32
    cannot order them) and whose distance order is the reverse of their index order; the other
    queries are generic."""
    g = torch.Generator().manual_seed(seed)
    directions = torch.nn.functional.normalize(
        torch.randn(n_close, dim, generator=g, dtype=torch.float64), dim=1
    )
    radii = 1.0 + 1e-11 * torch.arange(n_close, 0, -1, dtype=torch.float64)
    close = directions * radii[:, None]
    far = 3.0 + torch.randn(n_far, dim, generator=g, dtype=torch.float64)
    reference = torch.cat([close, far])
    query = torch.cat(
        [
            torch.zeros(3, dim, dtype=torch.float64),
            torch.randn(20, dim, generator=g, dtype=torch.float64),
        ]
    )
    return query, reference


def test_near_ties_that_float32_cannot_order_use_float64(monkeypatch):
    query, reference = near_ties()
    d_ref, i_ref = brute_force(query, reference, 8)
    assert torch.equal(i_ref[0], torch.arange(11, 3, -1))  # the order float32 cannot see
    exact_rows = []
    real = exact_knn._Search._sorted_exact

    def spy(self, sub, c, k):
        exact_rows.extend(sub.tolist())
        return real(self, sub, c, k)

    monkeypatch.setattr(exact_knn._Search, "_sorted_exact", spy)
    d, i = knn(query, reference, 8, precision="fp32")
    assert torch.equal(i, i_ref)
    torch.testing.assert_close(d, d_ref, rtol=1e-14, atol=1e-14)
    assert {0, 1, 2} <= set(exact_rows)  # the near-tie rows took the float64 sort
    assert len(set(exact_rows)) < len(query)  # and some rows were certified in float32


@pytest.mark.parametrize("leave_one_out", [True, False])
def test_certified_rows_equal_the_all_float64_path(monkeypatch, leave_one_out):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(120, 16, generator=g)
    x[10] = x[11]  # an exact tie
    r = None if leave_one_out else torch.randn(90, 16, generator=g)
    d_fast, i_fast = knn(x, r, 7)
    # An infinite error bound certifies nothing: exhaustive search, every row sorted in float64.
    monkeypatch.setattr(
        exact_knn, "similarity_error_bound", lambda *a, **kw: torch.tensor(float("inf"))
    )
    d_slow, i_slow = knn(x, r, 7)
    assert torch.equal(i_fast, i_slow)
    assert torch.equal(d_fast, d_slow)
    assert torch.equal(i_fast, brute_force(x, r, 7)[1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [7, 64, 1000])
def test_entries_above_returns_exactly_the_entries_reaching_tau(dtype, width):
    g = torch.Generator().manual_seed(width)
    sim = torch.randn(9, width, generator=g).to(dtype)
    sim[2, :] = 0.5  # a row of equal values
    tau = torch.randn(9, generator=g)
    tau[0] = -float("inf")
    row, col, val = exact_knn._entries_above(sim, tau)
    expected = (sim.float() >= tau[:, None]).nonzero()
    assert (row[1:] >= row[:-1]).all()  # grouped by row, as the pool needs
    key = row * width + col
    assert torch.equal(key.sort().values, expected[:, 0] * width + expected[:, 1])
    assert torch.equal(val, sim.float()[row, col])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("width", [5, 20, 5000])
def test_the_first_block_fills_the_pool_with_every_rows_top_k(dtype, width):
    g = torch.Generator().manual_seed(1)
    sim = torch.randn(6, width, generator=g).to(dtype)
    k = 9
    pool = exact_knn._Pool(6, k, sim.device)
    pool.first(sim)
    kept = min(k, width)
    expected = sim.float().sort(dim=1, descending=True).values[:, :kept]
    assert torch.equal(pool.val[:, :kept], expected)
    assert torch.equal(sim.float().gather(1, pool.idx[:, :kept]), pool.val[:, :kept])
    assert bool((pool.val[:, kept:] == -float("inf")).all())
    assert bool((pool.idx[:, kept:] == -1).all())
    expected_tau = expected[:, -1] if width >= k else torch.full((6,), -float("inf"))
    assert torch.equal(pool.tau, expected_tau)


def test_pool_keeps_the_k_largest_and_the_threshold():
    g = torch.Generator().manual_seed(2)
    values = torch.randn(5, 40, generator=g)
    pool = exact_knn._Pool(5, 6, values.device)
    for c0 in range(0, 40, 7):  # blocks of columns, entries in row-major order
        block = values[:, c0 : c0 + 7]
        row, col = (block >= pool.tau[:, None]).nonzero(as_tuple=True)
        pool.add(row, col + c0, block[row, col])
    top = values.topk(6, dim=1)
    assert torch.equal(pool.val, top.values)
    assert torch.equal(pool.idx, top.indices)
    assert torch.equal(pool.tau, top.values[:, -1])


@pytest.mark.parametrize("leave_one_out", [True, False])
def test_worker_threads_give_the_single_thread_answer(leave_one_out):
    """Three worker threads (set here: the suite runs each process at one torch thread, which
    alone would never reach the threaded path) give the brute-force and the one-thread answer."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(700, 8, generator=g)
    x[600:640] = x[3]  # many exact duplicates across row blocks
    r = None if leave_one_out else torch.cat([torch.randn(300, 8, generator=g), x[:20]])
    saved = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        assert exact_knn._cpu_workers(x.device, len(x)) == 3
        d, i = knn(x, r, 12, memory_budget=200_000)
        assert torch.get_num_threads() == 3  # restored after the workers' single-thread ops
        torch.set_num_threads(1)
        assert exact_knn._cpu_workers(x.device, len(x)) == 1
        d1, i1 = knn(x, r, 12, memory_budget=200_000)
    finally:
        torch.set_num_threads(saved)
    d_ref, i_ref = brute_force(x, r, 12)
    assert torch.equal(i, i_ref)
    torch.testing.assert_close(d, d_ref, rtol=1e-12, atol=1e-12)
    assert torch.equal(i1, i) and torch.equal(d1, d)

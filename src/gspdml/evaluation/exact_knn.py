"""Exact k-nearest-neighbour search in bounded memory, with a pinned tie rule.

The neighbours of a query are the references ordered by the key (distance, index): the smallest
squared Euclidean distance first and, among equal distances, the smallest reference index first.
In leave-one-out mode (``reference is None``) the query's own row is excluded **by index**, so
exact duplicates of the query (other rows with the same vector) stay valid neighbours; this is
the self-exclusion rule of pytorch-metric-learning's AccuracyCalculator (v2.8.1), which
itself has no tie rule.

How the answer is exact without ever holding the N_q x N_r distance matrix:

1. *Candidates.* Query rows and reference columns are processed in blocks sized from
   ``memory_budget``. A block of similarities ``s_ij = q_i.r_j - |r_j|^2/2`` is computed with one
   matmul in a fast dtype (bfloat16 where the precision is ``bf16``, which ``auto`` picks on CPUs
   with native bf16 dot products and on CUDA GPUs of compute capability >= 8,
   :func:`gspdml.compat.hardware.resolve_precision`; float32 otherwise), so that ``|q_i - r_j|^2 = |q_i|^2 - 2 s_ij``.
   The ``k' = k + pad`` largest similarities per row are kept in a pool whose k'-th value tau
   is a running threshold: the first block of a row gives its k' largest (one ``topk``), and
   each later block contributes only its entries >= tau, found from maxima of groups of 32
   columns (one elementwise max per halving, no sort). Every discarded reference has a similarity
   <= the final tau = s_(k'). On CPU, row blocks run on ``torch.get_num_threads()`` worker
   threads with single-threaded operations.
2. *Exact re-ranking.* The candidates' distances are recomputed in float32 (one batched
   matmul, error bound ``e32``). Where the first k + 1 of them are more than ``2 e32`` apart,
   the float32 order is the exact one (no swap, no tie is possible) and only the k neighbours
   get their float64 distance. Other rows (near-ties, duplicates) keep their ``k + 4`` closest,
   get float64 distances and are sorted by (distance, index). The float64 squared distance is
   ``sum_d (q_d - r_d)^2`` with a fixed pairwise summation order (so a distance never depends on
   the block or path it was computed in).
3. *Certificate.* With ``e_i`` a rigorous bound on the rounding error of the fast similarities of
   row i (:func:`similarity_error_bound`), no discarded reference can beat or tie the k-th exact
   neighbour d_(k) when ``|q_i|^2 + min_j |r_j|^2 [equal-norm case] - 2 (s_(k') + e_i) > d_(k)``
   and no candidate dropped by the float32 pass can when ``d32_(next) - e32 > d_(k)``. Rows that
   fail (many near-ties around the k-th neighbour, e.g. duplicated embeddings) are searched again
   with four times more candidates, up to all references, where the search is exhaustive.

Two reductions keep tied and near-tied embeddings (a collapsed model) from reaching that
exhaustive search:

- *Identical references* (:func:`_identical_rows`) are grouped, groups numbered by their first
  row. The search runs over the distinct vectors (and, in leave-one-out mode, for the distinct
  queries only) with k_u = k (+1 in leave-one-out, where the query's own group may hold no other
  row) neighbours under the key (distance, first row), and :func:`_expand` lists the rows of those
  groups. This is exact: if a row j of group g is among a query's k nearest rows, fewer than k
  groups (not counting the query's own) precede g, since each brings a row (its first valid one)
  whose key (d_h, first_h) < (d_g, j). A group whose distance is strictly larger than that of k
  valid rows cannot contribute, so a query lists at most k rows per distinct distance.
- *Translation.* Distances do not change when both sides are translated by the references' mean
  c, but the rounding bounds of steps 1-2 scale with the vectors' norms. When translating shrinks
  the reference radius at least twofold (all embeddings near one point), steps 1-2 run on the
  translated vectors (rounded to the input dtype, unit roundoff u) and every bound is widened by
  that rounding: the translated distance differs from the exact one by at most
  2.03 u (|q - c| + max_j |r_j - c|)^2 (:meth:`_Search.slack`). The float64 distances of step 2
  are always computed from the untranslated inputs.
- *Scale.* The rounding bounds of steps 1-2 are relative (Higham's), which holds only while no
  product underflows or overflows the float32 (bfloat16) range: embeddings of norm 1e-25 (a
  dead model that is not L2-normalised) or 1e20 would be ranked wrongly under a valid-looking
  certificate. Steps 1-2 therefore work on the (translated) vectors multiplied by the power of
  two s that brings the largest reference norm into [1/2, 1) when it lies outside
  [2^-30, 2^30] (:func:`_unit_scale`; unit embeddings are not copied): exact in
  the normal range, and a coordinate that the scaling makes subnormal moves a distance by less
  than the bounds' absolute term ``1e-12 (|q| + max_j |r_j|)^2``. Their bounds are read back in
  the inputs' unit by dividing by s^2, also exact.

The result therefore equals a float64 full sort by (distance, index), truncated at k, for every
chunk size and memory budget; the tests check this against an unchunked brute force. The work
done is counted in a :class:`KnnStats` when one is passed to :func:`knn`.

``backend="faiss"`` replaces step 1 by ``faiss.IndexFlatL2`` (float32) and keeps steps 2-3.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Union

import numpy as np
import torch
from torch import Tensor

from gspdml.compat.hardware import Precision, resolve_precision
from gspdml.compat.tf32 import without_tf32
from gspdml.errors import ConfigError, import_optional
from gspdml.evaluation.results import (
    RetrievalResults,
    drop_excluded,
    encode_labels,
    relevant_counts,
)

DEFAULT_MEMORY_BUDGET = 256 * 2**20
_GROUP = 32
_BLOCK_ROWS, _BLOCK_COLS = 256, 8192
_BACKENDS = ("torch", "faiss")
_HASH_COLUMNS = 16
#: the largest reference norms the fast passes take unscaled (:func:`_unit_scale`)
_SAFE_RADIUS = (2.0**-30, 2.0**30)

#: embeddings as the search takes them: ``[N, D]`` floats
Matrix = Union[Tensor, np.ndarray]
#: labels: any hashable numpy-compatible values, one per row
Labels = Union[Tensor, np.ndarray, Sequence[Any]]
DeviceLike = Union[str, torch.device]
#: one search over (queries, references, leave-one-out, k): (distances, indices)
SearchFn = Callable[[Tensor, Tensor, bool, int], tuple[Tensor, Tensor]]
#: ``run(fn, (rows, *per_row))``: fn over slices of rows, each output concatenated
RowRunner = Callable[[Callable[..., tuple[Tensor, ...]], tuple[Tensor, ...]], tuple[Tensor, ...]]


@dataclasses.dataclass
class KnnStats:
    """Work counters of :func:`knn` calls (they accumulate): ``passes`` (candidate searches and
    retries), ``candidates`` ((query, reference) pairs re-ranked in float32 or listed from groups
    of identical references), ``exact_distances`` (float64 ones), ``distinct_references``."""

    passes: int = 0
    candidates: int = 0
    exact_distances: int = 0
    distinct_references: int = 0
    _lock: threading.Lock = dataclasses.field(
        default_factory=threading.Lock, repr=False, compare=False
    )

    def add(self, **counts: int) -> None:
        """Adds to the named counters (thread-safe: re-ranking runs on worker threads)."""
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + int(value))


def retrieve(
    query: Matrix,
    query_labels: Labels,
    reference: Optional[Matrix] = None,
    reference_labels: Optional[Labels] = None,
    *,
    k: int | None = None,
    min_k: int = 1,
    class_size: bool = True,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: str = "torch",
    precision: Precision = "auto",
    device: Optional[DeviceLike] = None,
) -> RetrievalResults:
    """Labels + exact kNN -> :class:`RetrievalResults`.

    ``k=None``: max_i R_i (what MAP@R needs; pytorch-metric-learning's ``"max_bin_count"``; not
    with ``class_size=False``), at least ``min_k``, at most the searchable references. ``k=0``
    searches nothing (the labels and R_i only). Labels are re-coded, never cast to float.
    """
    loo = reference is None
    if loo and reference_labels is not None:
        raise ConfigError("reference_labels", "given without reference embeddings")
    if not loo and reference_labels is None:
        raise ConfigError("reference_labels", "required when reference embeddings are given")
    values, q_codes, r_codes = encode_labels(query_labels, reference_labels)
    excluded = torch.arange(len(q_codes)) if loo else None
    num_relevant = relevant_counts(q_codes, r_codes, len(values), excluded)
    n_ref = max(0, len(r_codes) - int(loo))
    r_max = int(num_relevant.max()) if len(num_relevant) else 0
    if k is None:
        k = min(max(r_max if class_size else 0, int(min_k), 1), n_ref)
    if k == 0 or not len(q_codes):  # the labels alone: no query, or metrics that rank every
        # reference themselves
        n_q = len(_as_matrix(query, "query", device))
        distances = torch.empty(n_q, 0, dtype=torch.float64)
        indices = torch.empty(n_q, 0, dtype=torch.int64)
    else:
        distances, indices = knn(
            query,
            reference,
            k,
            memory_budget=memory_budget,
            backend=backend,
            precision=precision,
            device=device,
        )
    if len(indices) != len(q_codes):
        raise ConfigError(
            "query_labels", f"has {len(q_codes)} entries for {len(indices)} embeddings"
        )
    if reference is not None and len(r_codes) != len(reference):
        raise ConfigError(
            "reference_labels", f"has {len(r_codes)} entries for {len(reference)} embeddings"
        )
    return RetrievalResults(indices, distances, q_codes, r_codes, values, excluded=excluded)


def knn(
    query: Matrix,
    reference: Optional[Matrix] = None,
    k: int = 1,
    *,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: str = "torch",
    precision: Precision = "auto",
    device: Optional[DeviceLike] = None,
    pad: int | None = None,
    stats: KnnStats | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact k nearest references of each query, ordered by (squared L2 distance, index).

    Args:
        query: [N_q, D] float array or tensor (float32 or float64 kept as is, other floats become
            float32; the re-ranking converts its candidates to float64).
        reference: [N_r, D] or None for leave-one-out (queries are the references; each query's
            own row is excluded by index, duplicates of it remain).
        k: number of neighbours, 1 <= k <= N_r (N_q - 1 in leave-one-out).
        memory_budget: bytes for the temporary blocks (not the inputs and outputs; at least one
            query row and one reference column).
        backend: "torch" or "faiss" (candidates from ``faiss.IndexFlatL2``; re-ranking exact).
        precision: the run's precision (a ``PrecisionChoice`` or a name, ``auto`` resolved
            here): the candidate matmul runs in bfloat16 for ``bf16``, else float32; it changes
            speed only, never the result.
        device: torch device for the search (default: the query tensor's device, else CPU).
        pad: extra candidates per row beyond k (default max(16, k // 2)).
        stats: a :class:`KnnStats` that counts the work done (optional).

    Returns:
        distances float64 [N_q, k] (squared Euclidean) and indices int64 [N_q, k].
    """
    if backend not in _BACKENDS:
        raise ConfigError("backend", f"unknown kNN backend {backend!r}; allowed: {list(_BACKENDS)}")
    if int(memory_budget) <= 0:
        raise ConfigError(
            "memory_budget", f"must be a positive number of bytes, got {memory_budget}"
        )
    q = _as_matrix(query, "query", device)
    dtype = _matmul_dtype(precision, q.device)
    loo = reference is None
    r = q if reference is None else _as_matrix(reference, "reference", q.device)
    if q.shape[1] != r.shape[1]:
        raise ConfigError(
            "reference", f"dimension {r.shape[1]} differs from the query dimension {q.shape[1]}"
        )
    n_valid = r.shape[0] - int(loo)
    if not 1 <= k <= n_valid:
        raise ConfigError(
            "k", f"must be in [1, {n_valid}] (number of searchable references), got {k}"
        )
    stats = KnnStats() if stats is None else stats
    search = functools.partial(
        _certified_knn,
        memory_budget=int(memory_budget),
        backend=backend,
        dtype=dtype,
        pad=pad,
        stats=stats,
    )
    with _exact_cuda_matmuls(q.device):
        groups = _identical_rows(r)
        stats.distinct_references = groups.size
        if groups.size == r.shape[0]:
            return search(q, r, loo, k)
        return _deduplicated_knn(q, loo, k, groups, search, int(memory_budget), stats)


def _deduplicated_knn(
    q: Tensor,
    loo: bool,
    k: int,
    groups: _Groups,
    search: SearchFn,
    memory_budget: int,
    stats: KnnStats,
) -> tuple[Tensor, Tensor]:
    """kNN over the distinct reference vectors, listed back as rows (module docstring)."""
    distinct = groups.rows
    k_u = min(k + int(loo), groups.size)
    group_dist, group_idx = search(distinct if loo else q, distinct, False, k_u)
    row_group = groups.of if loo else torch.arange(q.shape[0], device=q.device)
    valid = groups.count[group_idx]
    if loo:  # the query's own group holds one row less
        valid = valid - (group_idx == torch.arange(groups.size, device=q.device)[:, None]).long()
    caps = _group_caps(group_dist, valid, k)
    per_row = max(1, int(caps.sum(1).max()))
    step = max(1, memory_budget // (per_row * 8 * 8))
    dist, idx = [], []
    for s in range(0, len(row_group), step):
        rows = torch.arange(s, min(s + step, len(row_group)), device=q.device)
        g = row_group[rows]
        d, i = _expand(rows, group_dist[g], group_idx[g], caps[g], groups, loo, k, stats)
        dist.append(d)
        idx.append(i)
    return torch.cat(dist), torch.cat(idx)


def _group_caps(group_dist: Tensor, valid: Tensor, k: int) -> Tensor:
    """Rows to list from each found group [n, k_u] (sorted by distance): a row of rank r in its
    group has the C valid rows of strictly nearer groups and r rows of its own before it, so only
    ranks r < k - C can be among the k nearest."""
    before = valid.cumsum(1) - valid
    new = torch.ones_like(group_dist, dtype=torch.bool)
    new[:, 1:] = group_dist[:, 1:] != group_dist[:, :-1]
    run_start = (torch.arange(new.shape[1], device=new.device) * new).cummax(1).values
    strictly_nearer = before.gather(1, run_start)
    return torch.minimum(valid, (k - strictly_nearer).clamp(min=0))


def _expand(
    rows: Tensor,
    group_dist: Tensor,
    group_idx: Tensor,
    caps: Tensor,
    groups: _Groups,
    loo: bool,
    k: int,
    stats: KnnStats,
) -> tuple[Tensor, Tensor]:
    """The k nearest rows of each query ``rows`` [n] from its groups: the first ``caps`` valid rows
    of each group (a group's rows ascending, the query itself skipped in leave-one-out mode),
    in (distance, index) order.

    The listed rows of a query come in group order, so by distance, and by index within a
    group; only a run of equal distances that spans several groups (an exact tie between
    distinct vectors) is reordered, by index (one sort of the key (run, index)).
    """
    n, k_u = caps.shape
    flat_caps = caps.reshape(-1)
    slot = torch.repeat_interleave(torch.arange(n * k_u, device=rows.device), flat_caps)
    rank = torch.arange(len(slot), device=rows.device) - (flat_caps.cumsum(0) - flat_caps)[slot]
    row = slot // k_u
    g = group_idx.reshape(-1)[slot]
    if loo:
        rank += ((g == groups.of[rows[row]]) & (rank >= groups.position[rows[row]])).long()
    idx = groups.members[groups.start[g] + rank]
    dist = group_dist.reshape(-1)[slot]
    stats.add(candidates=len(slot))
    same_run = (row[1:] == row[:-1]) & (dist[1:] == dist[:-1])
    if bool((same_run & (g[1:] != g[:-1])).any()):
        run = torch.cat([row.new_zeros(1), (~same_run).long().cumsum(0)])
        order = (run * len(groups.of) + idx).argsort()
        dist, idx = dist[order], idx[order]
    counts = torch.bincount(row, minlength=n)
    take = ((counts.cumsum(0) - counts)[:, None] + torch.arange(k, device=rows.device)).reshape(-1)
    return dist[take].view(n, k), idx[take].view(n, k)


@dataclasses.dataclass
class _Groups:
    """Identical rows of a matrix x, groups numbered by first occurrence: ``of`` [N] the group of
    each row, ``first`` [G] its first row, ``count`` [G], ``members`` [N] the rows sorted by
    (group, index), ``start`` [G] where each group begins in ``members``, ``position`` [N] each
    row's place within its group, ``rows`` [G, D] the distinct vectors x[first]."""

    of: torch.Tensor
    first: torch.Tensor
    count: torch.Tensor
    members: torch.Tensor
    start: torch.Tensor
    position: torch.Tensor
    rows: torch.Tensor

    @property
    def size(self) -> int:
        return len(self.first)


def _identical_rows(x: Tensor) -> _Groups:
    """Groups of equal rows (by value: -0.0 equals 0.0).

    Rows are keyed by an int64 hash of the bits of up to ``_HASH_COLUMNS`` columns (wrapping
    sums of bits times fixed odd weights); equal rows always share a key, and every row is then
    compared with its group's first row. Distinct rows that share a key make that check fail, and
    the grouping falls back to ``torch.unique(x, dim=0)`` (exact, slower).
    """
    n, dim = x.shape
    cols = torch.linspace(0, dim - 1, min(dim, _HASH_COLUMNS), device=x.device).long()
    bits = (x[:, cols] + 0.0).view(torch.int32 if x.dtype == torch.float32 else torch.int64).long()
    weights = (
        torch.randint(0, 2**61, (len(cols),), generator=torch.Generator().manual_seed(0)) * 2 + 1
    )
    key = (bits * weights.to(x.device)).sum(1)
    of, first = _first_occurrence(torch.unique(key, return_inverse=True)[1])
    if not bool((x == x[first[of]]).all()):
        of, first = _first_occurrence(torch.unique(x, dim=0, return_inverse=True)[1])
    count = torch.bincount(of, minlength=len(first))
    members = of.argsort(stable=True)
    start = count.cumsum(0) - count
    position = torch.empty_like(members)
    position[members] = torch.arange(n, device=x.device)
    return _Groups(of, first, count, members, start, position - start[of], x[first])


def _first_occurrence(inverse: Tensor) -> tuple[Tensor, Tensor]:
    """Renumbers group labels [N] by first row: (labels, first row of each group)."""
    n = len(inverse)
    rows = torch.arange(n, device=inverse.device)
    first = torch.full(
        (int(inverse.max()) + 1 if n else 0,), n, device=inverse.device
    ).scatter_reduce_(0, inverse, rows, "amin")
    order = first.argsort()
    rank = torch.empty_like(order)
    rank[order] = torch.arange(len(order), device=order.device)
    return rank[inverse], first[order]


def _certified_knn(
    q: Tensor,
    r: Tensor,
    loo: bool,
    k: int,
    *,
    memory_budget: int,
    backend: str,
    dtype: torch.dtype,
    pad: Optional[int],
    stats: KnnStats,
) -> tuple[Tensor, Tensor]:
    """Candidates, certified re-ranking, and four times more candidates for uncertified rows."""
    n_valid = r.shape[0] - int(loo)
    workers = _cpu_workers(q.device, q.shape[0])
    search = _Search(q, r, loo, max(1, memory_budget // workers), dtype, stats)
    rows = torch.arange(q.shape[0], device=q.device)
    k_cand = min(n_valid, k + (max(16, k // 2) if pad is None else int(pad)))
    first: Optional[tuple[Tensor, Tensor]] = None  # faiss's candidates of the first pass
    if backend == "faiss":
        cand_idx, bound = _faiss_candidates(search.q, search.r, loo, k_cand)
        first = cand_idx, search.in_input_units(bound - search.slack(rows))
    dist = torch.empty(q.shape[0], k, dtype=torch.float64, device=q.device)
    idx = torch.empty(q.shape[0], k, dtype=torch.int64, device=q.device)
    pending, extra = rows, 4
    with _row_parallel(workers) as run:
        while len(pending):
            stats.add(passes=1)
            if first is None:
                c_idx, c_bound = run(
                    functools.partial(search.candidates, k_cand=k_cand), (pending,)
                )
            else:
                c_idx, c_bound = first[0][pending], first[1][pending]
                first = None
            keep = min(c_idx.shape[1], k + extra)
            d, i, rerank_bound = run(
                functools.partial(search.rerank, k=k, keep=keep), (pending, c_idx)
            )
            ok = ((c_bound > d[:, -1]) | (k_cand >= n_valid)) & (rerank_bound > d[:, -1])
            dist[pending[ok]], idx[pending[ok]] = d[ok], i[ok]
            pending = pending[~ok]
            k_cand, extra = min(n_valid, 4 * k_cand), 4 * extra
    return dist, idx


def _cpu_workers(device: torch.device, n_rows: int) -> int:
    """Threads that each search their own query rows (CPU, enough rows), else 1."""
    if device.type != "cpu" or n_rows < 2 * _BLOCK_ROWS:
        return 1
    return max(1, torch.get_num_threads())


@contextlib.contextmanager
def _row_parallel(workers: int) -> Iterator[RowRunner]:
    """``run(fn, (rows, *per_row))`` applies fn to consecutive slices of ``_BLOCK_ROWS`` rows and
    concatenates each output. With ``workers`` > 1 the slices run on that many threads, each
    with single-threaded torch ops: the two levels of parallelism do not nest, and a worker
    that the OS delays does not stall the others at every operation's barrier (many small
    operations per block make intra-op parallelism fragile on a loaded machine)."""
    if workers == 1:
        yield lambda fn, args: fn(*args)
        return
    saved = torch.get_num_threads()
    executor = ThreadPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,))

    def run(fn: Callable[..., tuple[Tensor, ...]], args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        slices = [
            tuple(a[s : s + _BLOCK_ROWS] for a in args) for s in range(0, len(args[0]), _BLOCK_ROWS)
        ]
        parts = list(executor.map(lambda a: fn(*a), slices))
        return tuple(torch.cat(out) for out in zip(*parts))

    try:
        yield run
    finally:
        executor.shutdown()
        torch.set_num_threads(saved)


def similarity_error_bound(
    q_norm: Tensor,
    r_max: float,
    dim: int,
    *,
    u_in: float,
    u_acc: float,
    u_out: float,
    bias: bool = True,
) -> Tensor:
    """Rigorous bound on |fl(s_ij) - s_ij| for s_ij = q_i.r_j (- |r_j|^2 / 2 when ``bias``).

    Inputs rounded to the matmul dtype (unit roundoff ``u_in``) change the dot product by at most
    (2 u_in + u_in^2)|q||r|; a length-D accumulation with unit roundoff ``u_acc`` adds at most
    gamma_D = D u_acc / (1 - D u_acc) times sum|q_d r_d| <= |q||r| (Higham, *Accuracy and
    Stability of Numerical Algorithms*, eq. 3.5, valid for every summation order); rounding the
    bias -|r|^2/2 costs u_in |r|^2/2 and storing the result u_out |s| <= u_out (|q||r| + |r|^2/2).
    Everything is inflated by 1 % plus a float64 slack so that the float64 arithmetic of the
    certificate is covered too.
    """
    gamma = dim * u_acc / (1.0 - dim * u_acc)
    qr = q_norm * r_max
    half_sq = 0.5 * r_max * r_max if bias else 0.0
    bound = (2.0 * u_in + u_in * u_in + gamma) * qr + u_out * (qr + half_sq) + u_in * half_sq
    return 1.01 * bound + 1e-12 * (q_norm + r_max) ** 2


class _Search:
    """Blocked candidate generation and certified exact re-ranking for one query/reference pair."""

    def __init__(
        self, q: Tensor, r: Tensor, loo: bool, budget: int, dtype: torch.dtype, stats: KnnStats
    ) -> None:
        self.exact_q, self.exact_r = q, r
        self.loo, self.budget, self.dtype, self.stats = loo, budget, dtype, stats
        self.dim = q.shape[1]
        q_t, r_t, self.shift_u = _translated(q, r, loo)
        r_sq = squared_norms(r_t)
        self.scale = _unit_scale(r_sq)
        self.r, self.r_sq = _times(r_t, self.scale), r_sq * self.scale**2  # both exact
        self.q = self.r if loo or q_t is r_t else _times(q_t, self.scale)
        self.q_sq = self.r_sq if self.q is self.r else squared_norms(self.q)
        self.r_max = float(self.r_sq.max().sqrt()) if len(self.r_sq) else 0.0
        r_min_sq = float(self.r_sq.min()) if len(self.r_sq) else 0.0
        u = _unit_roundoff(dtype)
        # Equal reference norms (unit embeddings): rank by q.r alone, |r|^2 enters the bound.
        self.bias = (self.r_max**2 - r_min_sq) > u * self.r_max**2
        self.r_floor = 0.0 if self.bias else r_min_sq
        self.r_fast = self.r.to(dtype)
        self.r32 = self.r if self.r.dtype == torch.float32 else self.r.float()
        self.neg_half_r_sq = (-0.5 * self.r_sq).to(dtype)
        self.error = functools.partial(
            similarity_error_bound, u_in=u, u_acc=2.0**-24, u_out=u, bias=self.bias
        )
        #: the bound of a float32 dot product q.r (the re-ranking's float32 pass)
        self.error32 = functools.partial(
            similarity_error_bound, u_in=2.0**-24, u_acc=2.0**-24, u_out=0.0, bias=False
        )

    def slack(self, rows: Tensor) -> Tensor:
        """Bound on |translated - exact| squared distance of query ``rows`` to any reference (0
        without translation): the translated vectors are within u |x - c| of x - c, so a distance
        moves by at most 2 (1 + u) u (|q - c| + |r - c|)^2, inflated to 2.03."""
        return 2.03 * self.shift_u * (self.q_sq[rows].sqrt() + self.r_max) ** 2

    def in_input_units(self, squared: Tensor) -> Tensor:
        """A squared distance of the scaled vectors in the unit of the inputs (exact: the scale
        is a power of two)."""
        return squared / self.scale**2

    def exact(self, rows: Tensor, cand: Tensor) -> Tensor:
        """float64 distances of query ``rows`` to the references ``cand`` [n, m], counted."""
        self.stats.add(exact_distances=cand.numel())
        return exact_squared_distances(self.exact_q[rows], self.exact_r, cand, self.budget)

    def candidates(self, rows: Tensor, k_cand: int) -> tuple[Tensor, Tensor]:
        """Indices [n, k'] of the k' most similar references of ``rows`` and, per row, a lower
        bound on the squared distance of every reference that is not a candidate.

        Per row, a pool holds the k' largest similarities of the first block; each later block
        adds its entries >= the pool's k'-th value ``tau`` (:func:`_entries_above`) and the pool
        is cut back to its k' largest, which raises tau.
        Every reference outside the pool has a similarity <= tau = the final k'-th candidate's.
        """
        n_ref = self.r.shape[0]
        elem = torch.finfo(self.dtype).bits // 8 + 4  # the block + its group maxima and entries
        cols = min(n_ref, max(1, self.budget // (2 * elem)), _BLOCK_COLS)
        # CPU row blocks stay cache-sized (and are spread over worker threads); a GPU takes the
        # largest block the budget allows, since each block costs launches and host syncs
        cap = _BLOCK_ROWS if self.q.device.type == "cpu" else len(rows)
        block_rows = max(1, min(len(rows), self.budget // (cols * elem), cap))
        out_idx, out_bound = [], []
        for start in range(0, len(rows), block_rows):
            sub = rows[start : start + block_rows]
            q_fast = self.q[sub].to(self.dtype)
            pool = _Pool(len(sub), k_cand, q_fast.device)
            for c0 in range(0, n_ref, cols):
                c1 = min(n_ref, c0 + cols)
                r_t = self.r_fast[c0:c1].T
                sim = (
                    torch.addmm(self.neg_half_r_sq[c0:c1], q_fast, r_t)
                    if self.bias
                    else q_fast @ r_t
                )
                if self.loo:
                    own = (sub >= c0) & (sub < c1)
                    sim[own.nonzero()[:, 0], sub[own] - c0] = -math.inf
                if c0 == 0:
                    pool.first(sim)
                else:
                    row, col, val = _entries_above(sim, pool.tau)
                    pool.add(row, col + c0, val)
            err = self.error(self.q_sq[sub].sqrt(), self.r_max, self.dim)
            out_idx.append(pool.idx)
            bound = self.q_sq[sub] + self.r_floor - 2.0 * (pool.tau.double() + err)
            out_bound.append(self.in_input_units(bound - self.slack(sub)))
        return torch.cat(out_idx), torch.cat(out_bound)

    def rerank(
        self, rows: Tensor, cand: Tensor, k: int, keep: int
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Exact float64 squared distances sorted by (distance, index), first k columns, and a
        lower bound ``d32_(keep+1) - e32`` on the candidates not re-ranked (module docstring,
        step 2: rows whose first k + 1 float32 distances are > ``2 e32`` apart are ranked)."""
        per_row = cand.shape[1] * self.dim * 4 * 2 + keep * self.dim * 8 * 3
        block_rows = max(1, self.budget // per_row)
        dists, idxs, bounds = [], [], []
        self.stats.add(candidates=cand.numel())
        for start in range(0, len(rows), block_rows):
            sub, c = rows[start : start + block_rows], cand[start : start + block_rows]
            q32 = self.q[sub].float()
            dot = torch.bmm(_rows_of(self.r32, c), q32[:, :, None])[:, :, 0].double()
            d32 = self.q_sq[sub, None] + self.r_sq[c] - 2.0 * dot
            if self.loo:
                d32 = d32.masked_fill(c == sub[:, None], math.inf)
            e32 = 2.0 * self.error32(self.q_sq[sub].sqrt(), self.r_max, self.dim)
            e32 = e32 + 2.0**-50 * (self.q_sq[sub] + self.r_max**2) + self.slack(sub)
            d32, pos = d32.topk(min(keep + 1, c.shape[1]), dim=1, largest=False)
            c = c.gather(1, pos)
            if keep < c.shape[1]:
                bounds.append(self.in_input_units(d32[:, keep] - e32))
            else:
                bounds.append(torch.full_like(d32[:, 0], math.inf))
            gaps = d32[:, 1 : k + 1] - d32[:, : min(k, d32.shape[1] - 1)]
            ranked = (gaps > 2.0 * e32[:, None]).all(1)
            d = torch.empty(len(sub), k, dtype=torch.float64, device=c.device)
            i = torch.empty(len(sub), k, dtype=torch.int64, device=c.device)
            i[ranked] = c[ranked, :k]
            d[ranked] = self.exact(sub[ranked], i[ranked])
            d[~ranked], i[~ranked] = self._sorted_exact(sub[~ranked], c[~ranked, :keep], k)
            dists.append(d)
            idxs.append(i)
        return torch.cat(dists), torch.cat(idxs), torch.cat(bounds)

    def _sorted_exact(self, sub: Tensor, c: Tensor, k: int) -> tuple[Tensor, Tensor]:
        """float64 distances of the candidates ``c`` [n, m], sorted by (distance, index), first k."""
        d = self.exact(sub, c)
        if self.loo:
            d = d.masked_fill(c == sub[:, None], math.inf)
        c, order = c.sort(dim=1)
        d = d.gather(1, order)
        d, order = d.sort(dim=1, stable=True)
        return d[:, :k], c.gather(1, order[:, :k])


def _translated(q: Tensor, r: Tensor, loo: bool) -> tuple[Tensor, Tensor, float]:
    """(q - c, r - c, u) with c the references' mean rounded to their dtype, each difference
    rounded to that dtype (unit roundoff u), when this at least halves the largest reference
    norm; else (q, r, 0.0)."""
    c = (r.sum(0, dtype=torch.float64) / r.shape[0]).to(r.dtype)
    r_t = _minus(r, c)
    if float(squared_norms(r_t).max()) > float(squared_norms(r).max()) / 4:
        return q, r, 0.0
    u = 2.0**-24 if r.dtype == torch.float32 else 2.0**-53
    return (r_t if loo else _minus(q, c)), r_t, u


def _unit_scale(norms_sq: Tensor) -> float:
    """The power of two 2^-e that brings the largest norm of the references (``norms_sq``: their
    squared norms), m 2^e with m in [1/2, 1), into [1/2, 1) when it lies outside
    [2^-30, 2^30] (where the bounds' absolute term covers every underflow and nothing overflows:
    no copy of the vectors); else 1 (also for zero rows). e is kept within [-480, 480], so that
    the square of the scale is a float64."""
    radius = float(norms_sq.max().sqrt()) if len(norms_sq) else 0.0
    if not 0.0 < radius < math.inf or _SAFE_RADIUS[0] <= radius <= _SAFE_RADIUS[1]:
        return 1.0
    return math.ldexp(1.0, -min(480, max(-480, math.frexp(radius)[1])))


def _times(x: Tensor, scale: float) -> Tensor:
    """``x * scale`` (``x`` itself for a scale of 1)."""
    return x if scale == 1.0 else x * scale


def _minus(x: Tensor, c: Tensor, rows: int = 65536) -> Tensor:
    """x - c computed in float64 and rounded to x's dtype, in blocks of rows."""
    return torch.cat([(x[i : i + rows].double() - c).to(x.dtype) for i in range(0, len(x), rows)])


def exact_squared_distances(
    q: Tensor, r: Tensor, cand: Tensor, budget: int = DEFAULT_MEMORY_BUDGET
) -> Tensor:
    """float64 ``sum_d (q_d - r_d)^2`` for q [n, D] against r[cand] with cand [n, m].

    The sum runs in a fixed pairwise order over d (adding the second half of the coordinates to
    the first half, the middle one alone when the count is odd, until one is left), so the value
    of a (query, reference) pair never depends on how the work was split into blocks.
    """
    n, m = cand.shape
    out = torch.empty(n, m, dtype=torch.float64, device=q.device)
    step = max(1, budget // max(1, n * q.shape[1] * 8 * 2))
    q64 = q[:, None, :].double()
    for c0 in range(0, m, step):
        sq = _rows_of(r, cand[:, c0 : c0 + step]).double().sub_(q64)
        sq.mul_(sq)
        width = sq.shape[-1]
        while width > 1:
            half = (width + 1) // 2
            sq[..., : width // 2].add_(sq[..., half:width])
            width = half
        out[:, c0 : c0 + step] = sq[..., 0]
    return out


def _rows_of(x: Tensor, index: Tensor) -> Tensor:
    """``x[index]`` for x [N, D] and an integer index [n, m] (index_select: contiguous row copies)."""
    return x.index_select(0, index.reshape(-1)).view(*index.shape, x.shape[1])


def squared_norms(x: Tensor, rows: int = 65536) -> Tensor:
    """float64 squared Euclidean norm of each row, computed in blocks of rows."""
    return torch.cat([x[i : i + rows].double().pow(2).sum(1) for i in range(0, len(x), rows)])


class _Pool:
    """The running k' most similar references of each of n rows (dense [n, k'] values and
    indices, -inf / -1 while fewer were seen) and per row the threshold tau = the k'-th kept
    value: every reference that is not kept has a similarity <= tau."""

    def __init__(self, n: int, k_cand: int, device: torch.device) -> None:
        self.val = torch.full((n, k_cand), -math.inf, device=device)
        self.idx = torch.full((n, k_cand), -1, dtype=torch.int64, device=device)

    @property
    def tau(self) -> Tensor:
        return self.val[:, -1]

    def first(self, sim: Tensor) -> None:
        """Fills the empty pool from the first block ``sim`` [n, m] (columns from 0): its k'
        largest entries per row (all m where m < k', the rest staying -inf)."""
        val, idx = sim.topk(min(self.val.shape[1], sim.shape[1]), dim=1)
        self.val[:, : val.shape[1]] = val.float()
        self.idx[:, : idx.shape[1]] = idx

    def add(self, row: Tensor, col: Tensor, val: Tensor) -> None:
        """Merges entries (``row`` ascending) and keeps the k' largest per row."""
        n, k_cand = self.val.shape
        counts = torch.bincount(row, minlength=n)
        width = int(counts.max()) if len(row) else 0
        if not width:
            return
        rank = torch.arange(len(row), device=row.device) - (counts.cumsum(0) - counts)[row]
        vals = torch.cat([self.val, self.val.new_full((n, width), -math.inf)], 1)
        idxs = torch.cat([self.idx, self.idx.new_full((n, width), -1)], 1)
        vals[row, k_cand + rank] = val
        idxs[row, k_cand + rank] = col
        self.val, pos = vals.topk(k_cand, dim=1)
        self.idx = idxs.gather(1, pos)


def _entries_above(sim: Tensor, tau: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(row ascending, column, float32 value) of the entries of ``sim`` [n, m] that are >= the
    row's threshold ``tau``.

    The threshold is applied to group maxima first: group g of the first ``_GROUP * W`` columns
    (W = m // ``_GROUP``) is the strided set {g, g + W, ..., g + (_GROUP - 1) W}, so its maximum
    is an elementwise maximum of contiguous column slabs (halving, vectorised in any dtype); only
    the groups whose maximum reaches tau are read element by element. The (fewer than
    ``_GROUP``) last columns are compared directly.
    """
    n, m = sim.shape
    width = m // _GROUP
    main = width * _GROUP
    gmax = sim[:, :main]
    while gmax.shape[1] > width:
        half = gmax.shape[1] // 2
        gmax = torch.maximum(gmax[:, :half], gmax[:, half:])
    flat = sim.reshape(-1)
    g_row, g_col = (gmax >= tau[:, None]).nonzero(as_tuple=True)
    pos = (g_row * m + g_col)[:, None] + width * torch.arange(_GROUP, device=sim.device)
    val = flat[pos]
    hit = val >= tau[g_row, None]
    pos, val = pos[hit], val[hit]
    if main < m:
        t_row, t_col = (sim[:, main:] >= tau[:, None]).nonzero(as_tuple=True)
        pos, order = torch.cat([pos, t_row * m + t_col + main]).sort()
        val = torch.cat([val, sim[t_row, t_col + main]])[order]
    return pos // m, pos % m, val.float()


def _faiss_candidates(q: Tensor, r: Tensor, loo: bool, k_cand: int) -> tuple[Tensor, Tensor]:
    needs = "backend='faiss' needs faiss; install the extra: pip install gspdml[faiss]"
    faiss = import_optional("faiss", "backend", needs)
    r32 = np.ascontiguousarray(r.cpu().numpy(), dtype=np.float32)
    q32 = np.ascontiguousarray(q.cpu().numpy(), dtype=np.float32)
    index = faiss.IndexFlatL2(r32.shape[1])
    index.add(r32)
    n_search = min(k_cand + int(loo), r32.shape[0])
    found_d2, found = index.search(q32, n_search)
    d2, ids = torch.from_numpy(found_d2).to(q.device), torch.from_numpy(found).to(q.device)
    if loo:
        (ids,) = drop_excluded(torch.arange(len(ids), device=ids.device), ids)
    # faiss d2 = |q|^2 + |r|^2 - 2 q.r in float32: translate the last one to a similarity bound.
    q_sq = squared_norms(q)
    r_max = float(squared_norms(r).max().sqrt())
    err = similarity_error_bound(
        q_sq.sqrt(), r_max, q.shape[1], u_in=2.0**-24, u_acc=2.0**-24, u_out=2.0**-24
    )
    last = d2[:, -1].double() - 2.0 * err - 2.0**-23 * (q_sq + r_max**2)
    if n_search >= r32.shape[0]:
        last = torch.full_like(last, math.inf)
    return ids, last


def _exact_cuda_matmuls(device: torch.device) -> contextlib.AbstractContextManager[None]:
    """The error bounds assume float32 accumulation: no TF32, no reduced-precision bf16 sums."""
    return without_tf32() if device.type == "cuda" else contextlib.nullcontext()


def _matmul_dtype(precision: Precision, device: torch.device) -> torch.dtype:
    """The candidate matmul's dtype: bfloat16 when the precision is (or resolves to) ``bf16``,
    else float32 (also for ``fp16``, whose range a similarity may leave)."""
    bf16 = resolve_precision(precision, device, field="precision").precision == "bf16"
    return torch.bfloat16 if bf16 else torch.float32


def _unit_roundoff(dtype: torch.dtype) -> float:
    return {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}[dtype]


def _as_matrix(x: Matrix, name: str, device: Optional[DeviceLike]) -> Tensor:
    t = torch.as_tensor(x)
    if t.ndim != 2 or not t.is_floating_point():
        raise ConfigError(
            name, f"expected a 2-D float array [N, D], got shape {tuple(t.shape)} dtype {t.dtype}"
        )
    if device is None:
        device = t.device
    t = t.detach().to(
        device=device, dtype=t.dtype if t.dtype in (torch.float32, torch.float64) else torch.float32
    )
    if not all(
        torch.isfinite(t[i : i + 65536].sum(dtype=torch.float64)) for i in range(0, len(t), 65536)
    ):
        raise ConfigError(name, "contains NaN or infinite values")
    return t.contiguous()

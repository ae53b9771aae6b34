"""Exact k-nearest-neighbour search in bounded memory, with a pinned tie rule.

The neighbours of a query are the references ordered by the key (distance, index): the smallest
squared Euclidean distance first and, among equal distances, the smallest reference index first.
In leave-one-out mode (``reference is None``) the query's own row is excluded **by index**, so
exact duplicates of the query (other rows with the same vector) stay valid neighbours; this is
the self-exclusion rule of pytorch-metric-learning's AccuracyCalculator (``spec/ecosystem.md``
§4.1), which itself has no tie rule.

How the answer is exact without ever holding the N_q x N_r distance matrix:

1. *Candidates.* Query rows and reference columns are processed in blocks sized from
   ``memory_budget``. A block of similarities ``s_ij = q_i.r_j - |r_j|^2/2`` is computed with one
   matmul in a fast dtype (bfloat16 on CPUs with native bf16 dot products and on CUDA GPUs of
   compute capability >= 8, float32 otherwise), so that ``|q_i - r_j|^2 = |q_i|^2 - 2 s_ij``.
   The ``k' = k + pad`` largest similarities per row are kept (a running top-k' merged across
   column blocks). A cheap two-level selection keeps this fast: the maximum of each group of 32
   columns, top-k' groups, then top-k' inside those groups; every discarded column has a
   similarity <= the k'-th kept one.
2. *Exact re-ranking.* The candidates' distances are recomputed in float32 (one batched
   matmul, error bound ``e32``) to keep the ``k + 4`` closest; those get their squared distance in
   float64 as ``sum_d (q_d - r_d)^2`` with a fixed pairwise summation order (so a distance never
   depends on the block it was computed in), and are sorted by (distance, index).
3. *Certificate.* With ``e_i`` a rigorous bound on the rounding error of the fast similarities of
   row i (:func:`similarity_error_bound`), no discarded reference can beat or tie the k-th exact
   neighbour d_(k) when ``|q_i|^2 + min_j |r_j|^2 [equal-norm case] - 2 (s_(k') + e_i) > d_(k)``
   and no candidate dropped by the float32 pass can when ``d32_(k+5) - e32 > d_(k)``. Rows that
   fail (many near-ties around the k-th neighbour, e.g. duplicated embeddings) are searched again
   with four times more candidates, up to all references, where the search is exhaustive.

The result therefore equals a float64 full sort by (distance, index), truncated at k, for every
chunk size and memory budget; the tests check this against an unchunked brute force.

``backend="faiss"`` replaces step 1 by ``faiss.IndexFlatL2`` (float32) and keeps steps 2-3.
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.results import RetrievalResults, encode_labels, relevant_counts

DEFAULT_MEMORY_BUDGET = 256 * 2**20
_GROUP = 32
_BLOCK_ROWS, _BLOCK_COLS = 512, 16384
_BACKENDS = ("torch", "faiss")
_PRECISIONS = ("auto", "float32", "bfloat16")


def retrieve(
    query,
    query_labels,
    reference=None,
    reference_labels=None,
    *,
    k: int | None = None,
    min_k: int = 1,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: str = "torch",
    precision: str = "auto",
    device=None,
) -> RetrievalResults:
    """Labels + exact kNN -> :class:`RetrievalResults`.

    ``k=None`` chooses the smallest k that MAP@R and R-precision need: max over queries of R_i
    (the number of relevant references; pytorch-metric-learning's ``k="max_bin_count"``), raised
    to ``min_k`` (e.g. the largest K of Recall@K) and capped at the number of searchable
    references. Labels may be any hashable numpy-compatible values (int64 ids stay exact; they are
    re-coded, never cast to float).
    """
    loo = reference is None
    if loo and reference_labels is not None:
        raise ConfigError("reference_labels", "given without reference embeddings")
    if not loo and reference_labels is None:
        raise ConfigError("reference_labels", "required when reference embeddings are given")
    values, q_codes, r_codes = encode_labels(query_labels, reference_labels)
    excluded = torch.arange(len(q_codes)) if loo else None
    num_relevant = relevant_counts(q_codes, r_codes, len(values), excluded)
    n_ref = len(r_codes) - int(loo)
    r_max = int(num_relevant.max()) if len(num_relevant) else 0
    if k is None:
        k = min(max(r_max, int(min_k), 1), n_ref)
    distances, indices = knn(
        query, reference, k, memory_budget=memory_budget, backend=backend,
        precision=precision, device=device,
    )
    if len(indices) != len(q_codes):
        raise ConfigError("query_labels", f"has {len(q_codes)} entries for {len(indices)} embeddings")
    if not loo and len(r_codes) != len(reference):
        raise ConfigError(
            "reference_labels", f"has {len(r_codes)} entries for {len(reference)} embeddings"
        )
    return RetrievalResults(indices, distances, q_codes, r_codes, values, excluded=excluded)


def knn(
    query,
    reference=None,
    k: int = 1,
    *,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    backend: str = "torch",
    precision: str = "auto",
    device=None,
    pad: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact k nearest references of each query, ordered by (squared L2 distance, index).

    Args:
        query: [N_q, D] float array or tensor (float32 or float64 kept as is, other floats become
            float32; the re-ranking converts its candidates to float64).
        reference: [N_r, D] or None for leave-one-out (queries are the references; each query's
            own row is excluded by index, duplicates of it remain).
        k: number of neighbours, 1 <= k <= N_r (N_q - 1 in leave-one-out).
        memory_budget: bytes for the temporary blocks (similarity block, candidate vectors,
            exact re-ranking); inputs and outputs are not counted. At least one query row and one
            reference column are processed at a time, so a budget smaller than that is rounded up.
        backend: "torch" (default) or "faiss" (candidate generation by ``faiss.IndexFlatL2``,
            needs ``pip install gspdml[faiss]``; re-ranking stays exact).
        precision: dtype of the candidate matmul: "auto", "float32" or "bfloat16". It changes speed
            only, never the result.
        device: torch device for the search (default: the query tensor's device, else CPU).
        pad: extra candidates per row beyond k (default max(16, k // 2)).

    Returns:
        distances float64 [N_q, k] (squared Euclidean) and indices int64 [N_q, k].
    """
    if backend not in _BACKENDS:
        raise ConfigError("backend", f"unknown kNN backend {backend!r}; allowed: {list(_BACKENDS)}")
    if precision not in _PRECISIONS:
        raise ConfigError("precision", f"unknown precision {precision!r}; allowed: {list(_PRECISIONS)}")
    if int(memory_budget) <= 0:
        raise ConfigError("memory_budget", f"must be a positive number of bytes, got {memory_budget}")
    q = _as_matrix(query, "query", device)
    loo = reference is None
    r = q if loo else _as_matrix(reference, "reference", q.device)
    if q.shape[1] != r.shape[1]:
        raise ConfigError(
            "reference", f"dimension {r.shape[1]} differs from the query dimension {q.shape[1]}"
        )
    n_valid = r.shape[0] - int(loo)
    if not 1 <= k <= n_valid:
        raise ConfigError("k", f"must be in [1, {n_valid}] (number of searchable references), got {k}")
    with _exact_cuda_matmuls(q.device):
        return _certified_knn(q, r, loo, k, n_valid, int(memory_budget), backend, precision, pad)


def _certified_knn(q, r, loo, k, n_valid, memory_budget, backend, precision, pad):
    """Candidates, certified re-ranking, and four times more candidates for uncertified rows."""
    search = _Search(q, r, loo, memory_budget, _resolve_precision(precision, q.device))
    rows = torch.arange(q.shape[0], device=q.device)
    k_cand = min(n_valid, k + (max(16, k // 2) if pad is None else int(pad)))
    if backend == "faiss":
        cand_idx, bound = _faiss_candidates(q, r, loo, k_cand)
    else:
        cand_idx = bound = None
    dist = torch.empty(q.shape[0], k, dtype=torch.float64, device=q.device)
    idx = torch.empty(q.shape[0], k, dtype=torch.int64, device=q.device)
    pending, extra = rows, 4
    while len(pending):
        if cand_idx is None:
            c_idx, c_bound = search.candidates(pending, k_cand)
        else:
            c_idx, c_bound = cand_idx[pending], bound[pending]
            cand_idx = bound = None
        d, i, rerank_bound = search.rerank(pending, c_idx, k, keep=min(c_idx.shape[1], k + extra))
        ok = ((c_bound > d[:, -1]) | (k_cand >= n_valid)) & (rerank_bound > d[:, -1])
        dist[pending[ok]], idx[pending[ok]] = d[ok], i[ok]
        pending = pending[~ok]
        k_cand, extra = min(n_valid, 4 * k_cand), 4 * extra
    return dist, idx


def similarity_error_bound(q_norm, r_max, dim, *, u_in, u_acc, u_out, bias=True):
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

    def __init__(self, q, r, loo, budget, dtype):
        self.q, self.r, self.loo, self.budget, self.dtype = q, r, loo, budget, dtype
        self.dim = q.shape[1]
        self.q_sq = squared_norms(q)
        self.r_sq = self.q_sq if loo else squared_norms(r)
        self.r_max = float(self.r_sq.max().sqrt()) if len(self.r_sq) else 0.0
        r_min_sq = float(self.r_sq.min()) if len(self.r_sq) else 0.0
        u = _unit_roundoff(dtype)
        # Equal reference norms (unit embeddings): rank by q.r alone, |r|^2 enters the bound.
        self.bias = (self.r_max**2 - r_min_sq) > u * self.r_max**2
        self.r_floor = 0.0 if self.bias else r_min_sq
        self.r_fast = r.to(dtype)
        self.r32 = r if r.dtype == torch.float32 else r.float()
        self.neg_half_r_sq = (-0.5 * self.r_sq).to(dtype)
        self.error = functools.partial(similarity_error_bound, u_in=u, u_acc=2.0**-24, u_out=u, bias=self.bias)

    def candidates(self, rows, k_cand):
        """Indices [n, k'] of the k' most similar references of ``rows`` and, per row, a lower
        bound on the squared distance of every reference that is not a candidate."""
        n_ref = self.r.shape[0]
        elem = torch.finfo(self.dtype).bits // 8 + 4
        cols = min(n_ref, max(1, self.budget // (2 * elem)), _BLOCK_COLS)
        cols = -(-n_ref // -(-n_ref // cols))  # equal column blocks
        block_rows = max(1, min(len(rows), self.budget // (cols * elem), _BLOCK_ROWS))
        out_idx, out_bound = [], []
        for start in range(0, len(rows), block_rows):
            sub = rows[start:start + block_rows]
            q_fast = self.q[sub].to(self.dtype)
            best_val = best_idx = None
            for c0 in range(0, n_ref, cols):
                c1 = min(n_ref, c0 + cols)
                r_t = self.r_fast[c0:c1].T
                sim = torch.addmm(self.neg_half_r_sq[c0:c1], q_fast, r_t) if self.bias else q_fast @ r_t
                if self.loo:
                    own = (sub >= c0) & (sub < c1)
                    sim[own.nonzero()[:, 0], sub[own] - c0] = -math.inf
                val, loc = _top_columns(sim, min(k_cand, c1 - c0))
                val, loc = val.float(), loc + c0
                if best_val is not None:
                    val, loc = torch.cat([best_val, val], 1), torch.cat([best_idx, loc], 1)
                    val, pos = val.topk(min(k_cand, val.shape[1]), dim=1)
                    loc = loc.gather(1, pos)
                best_val, best_idx = val, loc
            s_last = best_val[:, -1].double()
            err = self.error(self.q_sq[sub].sqrt(), self.r_max, self.dim)
            out_idx.append(best_idx)
            out_bound.append(self.q_sq[sub] + self.r_floor - 2.0 * (s_last + err))
        return torch.cat(out_idx), torch.cat(out_bound)

    def rerank(self, rows, cand, k, keep):
        """Exact float64 squared distances sorted by (distance, index): the first k columns, and
        a lower bound on the distance of the candidates that were not re-ranked exactly.

        A float32 pass (error bound ``e32``) keeps the ``keep`` closest candidates; only those get
        the float64 distance. Every other candidate is at least ``d32_(keep+1) - e32`` away.
        """
        per_row = cand.shape[1] * self.dim * 4 * 2 + keep * self.dim * 8 * 3
        block_rows = max(1, self.budget // per_row)
        dists, idxs, bounds = [], [], []
        for start in range(0, len(rows), block_rows):
            sub, c = rows[start:start + block_rows], cand[start:start + block_rows]
            q32 = self.q[sub].float()
            dot = torch.bmm(self.r32[c], q32[:, :, None])[:, :, 0].double()
            d32 = self.q_sq[sub, None] + self.r_sq[c] - 2.0 * dot
            if self.loo:
                d32 = d32.masked_fill(c == sub[:, None], math.inf)
            if keep < c.shape[1]:
                d32, pos = d32.topk(keep + 1, dim=1, largest=False)
                e32 = 2.0 * similarity_error_bound(
                    self.q_sq[sub].sqrt(), self.r_max, self.dim, u_in=2.0**-24, u_acc=2.0**-24, u_out=0.0, bias=False
                ) + 2.0**-50 * (self.q_sq[sub] + self.r_max**2)
                bounds.append(d32[:, -1] - e32)
                c = c.gather(1, pos[:, :keep])
            else:
                bounds.append(torch.full((len(sub),), math.inf, dtype=torch.float64, device=c.device))
            d = exact_squared_distances(self.q[sub], self.r, c, self.budget)
            if self.loo:
                d = d.masked_fill(c == sub[:, None], math.inf)
            c, order = c.sort(dim=1)
            d = d.gather(1, order)
            d, order = d.sort(dim=1, stable=True)
            dists.append(d[:, :k])
            idxs.append(c.gather(1, order[:, :k]))
        return torch.cat(dists), torch.cat(idxs), torch.cat(bounds)


def exact_squared_distances(q, r, cand, budget=DEFAULT_MEMORY_BUDGET):
    """float64 ``sum_d (q_d - r_d)^2`` for q [n, D] against r[cand] with cand [n, m].

    The sum runs in a fixed pairwise order over d (adding the second half of the coordinates to
    the first half until one is left), so the value of a (query, reference) pair never depends on
    how the work was split into blocks.
    """
    n, m = cand.shape
    out = torch.empty(n, m, dtype=torch.float64, device=q.device)
    step = max(1, budget // max(1, n * q.shape[1] * 8 * 3))
    for c0 in range(0, m, step):
        diff = q[:, None, :].double() - r[cand[:, c0:c0 + step]].double()
        sq = diff.mul_(diff)
        while sq.shape[-1] > 1:
            if sq.shape[-1] % 2:
                sq = torch.cat([sq, sq.new_zeros(*sq.shape[:-1], 1)], -1)
            half = sq.shape[-1] // 2
            sq = sq[..., :half] + sq[..., half:]
        out[:, c0:c0 + step] = sq[..., 0]
    return out


def squared_norms(x, rows: int = 65536):
    """float64 squared Euclidean norm of each row, computed in blocks of rows."""
    return torch.cat([x[i:i + rows].double().pow(2).sum(1) for i in range(0, len(x), rows)])


def _top_columns(sim, kk):
    """Values and column indices of the kk largest entries per row (two-level when wide).

    Group g holds the columns {g, g + G, g + 2G, ...} of the first ``_GROUP * G`` columns, so the
    maximum over a group is an elementwise maximum of ``_GROUP`` contiguous slabs (vectorised).
    The kk groups with the largest maxima contain the kk largest entries of those columns; the
    (fewer than ``_GROUP``) remaining columns join the final top-kk directly.
    """
    n, m = sim.shape
    groups = m // _GROUP
    if groups < 4 * kk:
        return sim.topk(kk, dim=1)
    main = groups * _GROUP
    grouped = sim[:, :main].view(n, _GROUP, groups)
    _, top_groups = grouped.amax(dim=1).topk(kk, dim=1)
    vals = grouped.permute(0, 2, 1)[torch.arange(n, device=sim.device)[:, None], top_groups].reshape(n, kk * _GROUP)
    cols = (top_groups[:, :, None] + torch.arange(_GROUP, device=sim.device) * groups).reshape(n, kk * _GROUP)
    if main < m:
        vals = torch.cat([vals, sim[:, main:]], dim=1)
        cols = torch.cat([cols, torch.arange(main, m, device=sim.device).expand(n, m - main)], dim=1)
    val, pos = vals.topk(kk, dim=1)
    return val, cols.gather(1, pos)


def _faiss_candidates(q, r, loo, k_cand):
    try:
        import faiss
    except ImportError as exc:
        raise ConfigError(
            "backend", "backend='faiss' needs faiss; install the extra: pip install gspdml[faiss]"
        ) from exc
    r32 = np.ascontiguousarray(r.cpu().numpy(), dtype=np.float32)
    q32 = np.ascontiguousarray(q.cpu().numpy(), dtype=np.float32)
    index = faiss.IndexFlatL2(r32.shape[1])
    index.add(r32)
    n_search = min(k_cand + int(loo), r32.shape[0])
    d2, ids = index.search(q32, n_search)
    d2, ids = torch.from_numpy(d2).to(q.device), torch.from_numpy(ids).to(q.device)
    if loo:
        own = ids == torch.arange(len(ids), device=ids.device)[:, None]
        keep = ~own
        keep[own.sum(1) == 0, -1] = False
        ids = ids[keep].view(len(ids), n_search - 1)
    # faiss d2 = |q|^2 + |r|^2 - 2 q.r in float32: translate the last one to a similarity bound.
    q_sq = squared_norms(q)
    r_max = float(squared_norms(r).max().sqrt())
    err = similarity_error_bound(q_sq.sqrt(), r_max, q.shape[1], u_in=2.0**-24, u_acc=2.0**-24, u_out=2.0**-24)
    last = d2[:, -1].double() - 2.0 * err - 2.0**-23 * (q_sq + r_max**2)
    if n_search >= r32.shape[0]:
        last = torch.full_like(last, math.inf)
    return ids, last


@contextlib.contextmanager
def _exact_cuda_matmuls(device):
    """The error bounds assume float32 accumulation: no TF32, no reduced-precision bf16 sums."""
    if device.type != "cuda":
        yield
        return
    flags = torch.backends.cuda.matmul
    saved = flags.allow_tf32, flags.allow_bf16_reduced_precision_reduction
    flags.allow_tf32, flags.allow_bf16_reduced_precision_reduction = False, False
    try:
        yield
    finally:
        flags.allow_tf32, flags.allow_bf16_reduced_precision_reduction = saved


def _resolve_precision(precision, device):
    if precision == "float32":
        return torch.float32
    if precision == "bfloat16":
        return torch.bfloat16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.get_device_capability(device)[0] >= 8 else torch.float32
    return torch.bfloat16 if _cpu_has_native_bf16() else torch.float32


@functools.lru_cache(maxsize=1)
def _cpu_has_native_bf16() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def _unit_roundoff(dtype) -> float:
    return {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8}[dtype]


def _as_matrix(x, name, device):
    t = torch.as_tensor(x)
    if t.ndim != 2 or not t.is_floating_point():
        raise ConfigError(name, f"expected a 2-D float array [N, D], got shape {tuple(t.shape)} dtype {t.dtype}")
    if device is None:
        device = t.device
    t = t.detach().to(device=device, dtype=t.dtype if t.dtype in (torch.float32, torch.float64) else torch.float32)
    if len(t) and not torch.isfinite(t.sum(dtype=torch.float64)):
        raise ConfigError(name, "contains NaN or infinite values")
    return t.contiguous()

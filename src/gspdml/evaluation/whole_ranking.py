"""The rank of every relevant reference in a query's whole ranking, in bounded memory: what the
full mAP and the uncut MRR read (:mod:`gspdml.evaluation.metrics`).

For query i with the squared distances d_il to the searchable references l (in leave-one-out
mode every row but the query's own) and the R_i relevant ones j (same label), ties are grouped
as scikit-learn's ``average_precision_score`` groups equal scores (a tie group is passed as a
whole, so a relevant reference tied with irrelevant ones gets no credit for the tie):

    n_ij = #{l : d_il <= d_ij}            (its rank, the whole tie group counted ahead of it)
    t_ij = #{relevant l : d_il <= d_ij}   (the relevant references up to that rank)
    AP_i = (1/R_i) sum_j t_ij / n_ij      (the precision at each recall step, weighted 1/R_i)
    RR_i = 1 / min_j n_ij

Without ties n_ij is the position of j in the ranking and AP_i is the textbook average
precision; with all embeddings equal (a collapsed model) every n_ij is the number of
references, so AP_i = R_i / N and RR_i = 1 / N, the score of a ranking that says nothing.

:func:`ranking_of_search` reads these from a search of every reference (columns sorted by
distance); :func:`whole_ranking_scores` computes them from the embeddings, a block of queries at
a time, in a few reused (block x distinct references) buffers sized from ``memory_budget``
(never a (queries x references) matrix, never a sorted row of references):

0. *Identical references* are grouped (:func:`~gspdml.evaluation.exact_knn._identical_rows`):
   the G distinct vectors are ranked once each, a group g weighing its m_g rows (m_g - 1 for the
   query's own group in leave-one-out mode). Every row of a group is at the same distance, so
   n_ij and t_ij are sums of weights over groups: with rel_ig the rows of g labelled y_i,
   ``n_ih = sum_{g : d_ig <= d_ih} m_g`` and ``t_ih = sum_{g : d_ig <= d_ih} rel_ig``, and each
   relevant group h counts rel_ih times in AP_i. All embeddings equal (a collapsed model) is one
   group: one distance per query. The relevant groups of a query are read from the (label,
   group) pairs of the references, never from a (queries x references) label comparison.
1. The squared distances of the block are computed in float64 from the references' mean c as
   ``A_il = |q_i - c|^2 + |r_l - c|^2 - 2 (q_i - c).(r_l - c)`` (one matmul). They differ from
   the exact search's float64 distances (:func:`gspdml.evaluation.exact_knn.exact_squared_distances`,
   which decide every tie) by at most ``B_i = 2 (2 D + 20) u (|q_i - c| + max_l |r_l - c|)^2``
   (u = 2^-53: the rounding of the translation, of a length-D dot product, Higham, *Accuracy and
   Stability of Numerical Algorithms*, eq. 3.5, and of the exact sum of squares, doubled).
2. The relevant groups (and the query's own group) get their exact distance, so t_ij is exact.
   Another group l is *certainly ahead* of j when ``A_il < A_ij - 2 B_i`` and *certainly behind*
   when ``A_il > A_ij + 2 B_i``; with the relevant A_ij of a query sorted, one ``searchsorted``
   per group (or one comparison per relevant group, when they are few) counts, for every j at
   once, the weight of the certain ones ahead of it.
3. The few groups within 2 B_i of some A_ij (near-ties) get their exact distance and are
   compared exactly, weighted by their rows.

The result equals a full float64 sort of every row, for every block size; the cost
(``benchmarks/evaluation.py --report``, ``--ties``) is one float64 matmul and one
``searchsorted`` per (query, distinct reference) pair.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from gspdml.evaluation.exact_knn import (
    DEFAULT_MEMORY_BUDGET,
    _Groups,
    _identical_rows,
    exact_squared_distances,
    squared_norms,
)

#: the exact columns of a block of queries: ``(row, group, relevant rows, rows)``
#: (:meth:`_LabelGroups.columns`)
Columns = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
#: float64 exact squared distances of (query row, distinct reference) pairs
ExactDistances = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
#: bytes per (query, reference) entry of the block buffers (:class:`_Workspace`) and the masks
#: computed in passing
_BYTES_PER_ENTRY = 48
#: the widest rows (most relevant references of a query in a block) counted by comparisons
_COMPARE_WIDTH = 24
#: the bytes of rows compared at once by :func:`_count_at_or_below` (within a core's L2 cache)
_CACHE_BYTES = 1 << 20


@dataclass(frozen=True)
class Ranking:
    """The relevant references of a block of queries, one per column (module docstring): ``hits``
    t_ij and ``ranks`` n_ij (float64 [n, m]), ``valid`` [n, m] which columns hold one, ``weights``
    (float64 [n, m]) how many relevant references each column stands for (the rows of a group of
    identical references; 1 in a search), ``r`` R_i (float64 [n])."""

    hits: torch.Tensor
    ranks: torch.Tensor
    valid: torch.Tensor
    weights: torch.Tensor
    r: torch.Tensor


def ranking_of_search(relevance: torch.Tensor, distances: torch.Tensor, r: torch.Tensor) -> Ranking:
    """The :class:`Ranking` of a search of every reference: ``relevance`` [n, k] and ``distances``
    [n, k] sorted by distance (any order within a tie), ``r`` R_i."""
    n, k = distances.shape
    position = torch.arange(k, device=distances.device).expand(n, k)
    last = torch.ones(n, k, dtype=torch.bool, device=distances.device)
    last[:, :-1] = distances[:, 1:] != distances[:, :-1]
    # the last column of each tie group: the smallest group end at or after each column
    end = torch.where(last, position, k).flip(1).cummin(1).values.flip(1)
    hits = relevance.to(torch.float64).cumsum(1).gather(1, end)
    valid = relevance.bool()
    return Ranking(
        hits, (end + 1).to(torch.float64), valid, valid.to(torch.float64), r.to(torch.float64)
    )


def whole_ranking_scores(
    query: torch.Tensor,
    query_codes: torch.Tensor,
    reference: torch.Tensor | None,
    reference_codes: torch.Tensor,
    scores: Mapping[str, Callable[[Ranking], torch.Tensor]],
    *,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> dict[str, torch.Tensor]:
    """float64 [N_q] (on the CPU) of each ``scores`` function of the :class:`Ranking` of every
    query (float [N_q, D], on the device to compute on) against ``reference`` (leave-one-out
    when None), labels as codes; blocks of queries sized from ``memory_budget`` bytes."""
    loo = reference is None
    device = query.device
    q64 = query.to(torch.float64)
    r64 = q64 if reference is None else reference.to(device, torch.float64)
    groups = _identical_rows(r64)
    distinct = groups.rows
    center = r64.mean(0)
    q_t = q64 - center
    d_t = distinct - center
    q_sq, d_sq = squared_norms(q_t), squared_norms(d_t)
    u = 2.0**-53
    radius = float(d_sq.max().sqrt()) if len(d_sq) else 0.0
    bound = 2 * (2 * q64.shape[1] + 20) * u * (q_sq.sqrt() + radius) ** 2
    pairs = _LabelGroups(reference_codes.to(device), groups)
    q_codes = query_codes.to(device)
    group_rows = groups.count
    rows = min(len(q64), max(1, int(memory_budget) // (_BYTES_PER_ENTRY * max(1, groups.size))))
    # One set of block buffers, reused: tensors of (block x references) allocated anew for each
    # block fragment the CPU heap, and the process keeps growing.
    work = _Workspace(rows, groups.size, device)
    exact = functools.partial(_exact_distances, q64, distinct, int(memory_budget))
    out = {name: torch.empty(len(q64), dtype=torch.float64, device=device) for name in scores}
    # queries in order of their number of exact columns, so that a block's rows are about as
    # wide as its widest (the counting pass compares each group with every column of a row)
    order = pairs.width(q_codes).argsort(stable=True)
    for start in range(0, len(q64), rows):
        block = order[start : start + rows]
        approx = work.approx[: len(block)]
        torch.addmm(d_sq[None, :], q_t[block], d_t.T, alpha=-2.0, out=approx)
        approx.add_(q_sq[block, None])
        own = groups.of[block] if loo else None
        columns = pairs.columns(q_codes[block], own)
        ranking = _block_ranking(exact, block, work, bound[block], columns, group_rows)
        for name, score in scores.items():
            out[name][block] = score(ranking)
    return {name: values.cpu() for name, values in out.items()}


class _LabelGroups:
    """The (label, group) pairs of the references with their row counts, sorted by label: the
    groups holding a label's rows, for any query, without a (queries x references) comparison."""

    def __init__(self, codes: torch.Tensor, groups: _Groups):
        size = max(1, groups.size)
        key, count = torch.unique(codes * size + groups.of, return_counts=True)
        self.label, self.group, self.count = key // size, key % size, count
        self.rows = groups.count
        labels = int(codes.max()) + 1 if len(codes) else 1
        self.length = torch.bincount(self.label, minlength=labels)
        self.start = self.length.cumsum(0) - self.length

    def width(self, codes: torch.Tensor) -> torch.Tensor:
        """The number of groups holding each query's label: its exact columns."""
        known = (codes >= 0) & (codes < len(self.length))
        return torch.where(known, self.length[torch.where(known, codes, 0)], 0)

    def columns(self, codes: torch.Tensor, own: torch.Tensor | None) -> Columns:
        """The exact columns of a block of queries (module docstring, step 2), row ascending:
        ``(row, group, relevant rows rel_ig, rows m_g)`` for each group holding the query's
        label, the query's own row taken out of its own group in leave-one-out mode (that group
        stays a column, relevant or not: it holds the query's label)."""
        length = self.width(codes)
        safe = torch.where(length > 0, codes, 0)
        row = torch.repeat_interleave(torch.arange(len(codes), device=codes.device), length)
        offset = torch.arange(len(row), device=codes.device) - (length.cumsum(0) - length)[row]
        index = self.start[safe][row] + offset
        group, relevant, rows = self.group[index], self.count[index], self.rows[self.group[index]]
        if own is not None:
            mine = (group == own[row]).long()
            relevant, rows = relevant - mine, rows - mine
        return row, group, relevant, rows


class _Workspace:
    """The (block x distinct references) buffers of :func:`whole_ranking_scores`: squared
    distances, their thresholds, slots and two masks (exact columns, uncertain)."""

    def __init__(self, rows: int, cols: int, device: torch.device):
        self.approx = torch.empty(rows, cols, dtype=torch.float64, device=device)
        self.scratch = torch.empty(rows, cols, dtype=torch.float64, device=device)
        self.slots = torch.empty(rows, cols, dtype=torch.int64, device=device)
        self.exact = torch.empty(rows, cols, dtype=torch.bool, device=device)
        self.uncertain = torch.empty(rows, cols, dtype=torch.bool, device=device)
        self.counter = torch.empty(rows, cols, dtype=torch.uint8, device=device)


def _block_ranking(
    exact: ExactDistances,
    block: torch.Tensor,
    work: _Workspace,
    bound: torch.Tensor,
    columns: Columns,
    group_rows: torch.Tensor,
) -> Ranking:
    """The :class:`Ranking` of the queries ``block`` from their approximate distances to the
    distinct references (``work.approx``), the rounding bound of each row, their exact
    ``columns`` (:meth:`_LabelGroups.columns`), the rows m_g of each group and ``exact``
    (float64 distances of (query, group) pairs); module docstring, steps 2-3."""
    n = len(block)
    approx, in_exact, uncertain = work.approx[:n], work.exact[:n], work.uncertain[:n]
    row, col, relevant, rows = columns
    per_row = torch.bincount(row, minlength=n)
    width = max(1, int(per_row.max()) if len(row) else 1)
    slot = torch.arange(len(row), device=row.device) - (per_row.cumsum(0) - per_row)[row]

    def dense(values: torch.Tensor, fill: float) -> torch.Tensor:
        out = torch.full((n, width), fill, dtype=values.dtype, device=row.device)
        out[row, slot] = values
        return out

    in_exact.zero_()
    in_exact[row, col] = True
    rel_weight, row_weight = dense(relevant.double(), 0.0), dense(rows.double(), 0.0)
    col_exact = dense(exact(block[row], col), math.inf)
    col_approx = dense(approx[row, col], math.inf)
    hits = _weighted_at_or_below(col_exact, rel_weight, col_exact)
    ahead = _weighted_at_or_below(col_exact, row_weight, col_exact)
    # Another group l is certainly ahead of the column j when A_il + 2B < A_ij. With the A_ij of
    # a row sorted, ``slots`` = #{j : A_ij <= A_il + 2B}: l is certainly ahead of the sorted
    # slots from there on, and uncertain when the last slot before is within 2B of A_il too.
    sorted_approx, order = col_approx.sort(1)
    margin = 2 * bound[:, None]
    high, slots = work.scratch[:n], work.slots[:n]
    torch.add(approx, margin, out=high)
    _count_at_or_below(sorted_approx, high, slots, work.counter[:n])
    below = torch.cat([torch.full_like(sorted_approx[:, :1], -math.inf), sorted_approx], 1)
    torch.gather(below, 1, slots, out=approx)  # the last slot at or below A_il + 2B
    approx.add_(2 * margin)
    torch.ge(approx, high, out=uncertain)  # that slot's A_ij >= A_il - 2B
    uncertain.logical_and_(~in_exact)
    slots.masked_fill_(uncertain | in_exact, width + 1)  # counted exactly, or already
    counts = torch.zeros(n, width + 2, dtype=torch.int64, device=row.device)
    counts.scatter_add_(1, slots, group_rows[None, :].expand_as(slots))
    ahead_sorted = counts.cumsum(1)[:, :width].to(torch.float64)
    ahead += torch.empty_like(ahead_sorted).scatter_(1, order, ahead_sorted)
    # the uncertain groups, compared exactly
    u_row, u_col = uncertain.nonzero(as_tuple=True)
    if len(u_row):
        u_count = torch.bincount(u_row, minlength=n)
        u_slot = torch.arange(len(u_row), device=row.device) - (u_count.cumsum(0) - u_count)[u_row]
        near = torch.full((n, int(u_count.max())), math.inf, dtype=torch.float64, device=row.device)
        near_rows = torch.zeros_like(near)
        near[u_row, u_slot] = exact(block[u_row], u_col)
        near_rows[u_row, u_slot] = group_rows[u_col].double()
        ahead += _weighted_at_or_below(near, near_rows, col_exact)
    return Ranking(hits, ahead, rel_weight > 0, rel_weight, rel_weight.sum(1))


def _weighted_at_or_below(
    values: torch.Tensor, weights: torch.Tensor, thresholds: torch.Tensor
) -> torch.Tensor:
    """float64 [n, w]: sum of ``weights`` [n, m] over the entries of ``values`` [n, m] (same row)
    that are <= each of ``thresholds`` [n, w]."""
    ordered, order = values.sort(1)
    cumulative = torch.cat(
        [torch.zeros_like(weights[:, :1]), weights.gather(1, order).cumsum(1)], 1
    )
    return cumulative.gather(1, torch.searchsorted(ordered, thresholds, right=True))


def _count_at_or_below(
    sorted_rows: torch.Tensor, values: torch.Tensor, out: torch.Tensor, counter: torch.Tensor
) -> None:
    """``out`` [n, N] = the number of entries of each sorted row of ``sorted_rows`` [n, w] that
    are <= each of ``values`` [n, N]: ``searchsorted``, or for narrow rows (w <=
    :data:`_COMPARE_WIDTH`, most classes) w comparisons counted in ``counter`` (uint8), about
    twice as fast on a CPU."""
    width = sorted_rows.shape[1]
    if width > _COMPARE_WIDTH:
        torch.searchsorted(sorted_rows, values, right=True, out=out)
        return
    # a few rows at a time, so that their values stay in the cache across the w comparisons
    step = max(1, _CACHE_BYTES // (9 * max(1, values.shape[1])))
    for s in range(0, len(values), step):
        part, count = values[s : s + step], counter[s : s + step]
        count.zero_()
        for k in range(width):
            count.add_(part >= sorted_rows[s : s + step, k : k + 1])
    out.copy_(counter)


def _exact_distances(
    q64: torch.Tensor, distinct: torch.Tensor, budget: int, rows: torch.Tensor, groups: torch.Tensor
) -> torch.Tensor:
    """float64 exact squared distances
    (:func:`~gspdml.evaluation.exact_knn.exact_squared_distances`) of the (query row, distinct
    reference) pairs, in pieces within ``budget`` bytes."""
    step = max(1, int(budget) // (q64.shape[1] * 8 * 4))
    values = [torch.empty(0, dtype=torch.float64, device=rows.device)] + [
        exact_squared_distances(q64[rows[s : s + step]], distinct, groups[s : s + step, None])[:, 0]
        for s in range(0, len(rows), step)
    ]
    return torch.cat(values)

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
a time, in a few reused (block x references) buffers sized from ``memory_budget`` (never a
(queries x references) matrix, never a sorted row of references):

1. The squared distances of the block are computed in float64 from the references' mean c as
   ``A_il = |q_i - c|^2 + |r_l - c|^2 - 2 (q_i - c).(r_l - c)`` (one matmul). They differ from
   the float64 distances of the exact search
   (:func:`gspdml.evaluation.exact_knn.exact_squared_distances`, which decide every tie) by at
   most
   ``B_i = 2 (2 D + 20) u (|q_i - c| + max_l |r_l - c|)^2`` (u = 2^-53: the rounding of the
   translation, of a length-D dot product, Higham, *Accuracy and Stability of Numerical
   Algorithms*, eq. 3.5, and of the exact sum of squares, doubled).
2. The relevant pairs get their exact distance, so t_ij is exact. An irrelevant reference l is
   *certainly ahead* of j when ``A_il < A_ij - 2 B_i`` and *certainly behind* when
   ``A_il > A_ij + 2 B_i``; with the relevant A_ij of a query sorted (R_i values), one
   ``searchsorted`` per reference (or R_i comparisons, when R_i is small) counts, for every j at
   once, the certain ones ahead of it.
3. The few irrelevant references within 2 B_i of some A_ij (ties and near-ties) get their exact
   distance and are compared exactly. Exact distances are computed once per (query, distinct
   reference vector), so duplicated references (a collapsed model) cost one distance.

The result equals a full float64 sort of every row, for every block size. The cost is one
float64 matmul and one ``searchsorted`` (or R_i comparisons) per (query, reference) pair,
several times the bounded metrics' search; ``benchmarks/evaluation.py --report`` measures it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from gspdml.evaluation.exact_knn import (
    DEFAULT_MEMORY_BUDGET,
    _identical_rows,
    exact_squared_distances,
    squared_norms,
)

#: bytes per (query, reference) entry of the block buffers (:class:`_Workspace`) and the masks
#: computed in passing
_BYTES_PER_ENTRY = 48
#: the widest rows (most relevant references of a query in a block) counted by comparisons
_COMPARE_WIDTH = 24


@dataclass(frozen=True)
class Ranking:
    """The relevant references of a block of queries, one per column (module docstring): ``hits``
    t_ij and ``ranks`` n_ij (float64 [n, m]), ``valid`` [n, m] which columns hold one, ``r``
    R_i (float64 [n])."""

    hits: torch.Tensor
    ranks: torch.Tensor
    valid: torch.Tensor
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
    return Ranking(hits, (end + 1).to(torch.float64), relevance.bool(), r.to(torch.float64))


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
    query of ``query`` (float [N_q, D], on the device to compute on) against ``reference``
    (leave-one-out when None), labels given as codes
    (:func:`gspdml.evaluation.results.encode_labels`); blocks of queries sized from
    ``memory_budget`` bytes (module docstring)."""
    loo = reference is None
    device = query.device
    q64 = query.to(torch.float64)
    r64 = q64 if reference is None else reference.to(device, torch.float64)
    exact = _ExactPairs(q64, r64, memory_budget)
    center = r64.mean(0)
    q_t = q64 - center
    r_t = q_t if reference is None else r64 - center
    q_sq = squared_norms(q_t)
    r_sq = q_sq if reference is None else squared_norms(r_t)
    u = 2.0**-53
    radius = float(r_sq.max().sqrt()) if len(r_sq) else 0.0
    bound = 2 * (2 * q64.shape[1] + 20) * u * (q_sq.sqrt() + radius) ** 2
    q_codes, r_codes = query_codes.to(device), reference_codes.to(device)
    rows = min(len(q64), max(1, int(memory_budget) // (_BYTES_PER_ENTRY * max(1, len(r64)))))
    # One set of block buffers, reused: tensors of (block x references) allocated anew for each
    # block fragment the CPU heap, and the process keeps growing.
    work = _Workspace(rows, len(r64), device)
    out = {name: torch.empty(len(q64), dtype=torch.float64, device=device) for name in scores}
    for start in range(0, len(q64), rows):
        block = torch.arange(start, min(start + rows, len(q64)), device=device)
        n = len(block)
        approx, relevant, other = work.approx[:n], work.relevant[:n], work.other[:n]
        torch.addmm(r_sq[None, :], q_t[block], r_t.T, alpha=-2.0, out=approx)
        approx.add_(q_sq[block, None])
        torch.eq(q_codes[block, None], r_codes[None, :], out=relevant)
        torch.logical_not(relevant, out=other)
        if loo:  # the query's own row is not searched
            own = torch.arange(n, device=device)
            relevant[own, block] = False
            other[own, block] = False
        ranking = _block_ranking(exact, block, work, bound[block])
        for name, score in scores.items():
            out[name][block] = score(ranking)
    return {name: values.cpu() for name, values in out.items()}


class _Workspace:
    """The (block x references) buffers of :func:`whole_ranking_scores`: squared distances, their
    thresholds, slots and three masks (relevant, other searchable, uncertain)."""

    def __init__(self, rows: int, cols: int, device):
        self.approx = torch.empty(rows, cols, dtype=torch.float64, device=device)
        self.scratch = torch.empty(rows, cols, dtype=torch.float64, device=device)
        self.slots = torch.empty(rows, cols, dtype=torch.int64, device=device)
        self.relevant = torch.empty(rows, cols, dtype=torch.bool, device=device)
        self.other = torch.empty(rows, cols, dtype=torch.bool, device=device)
        self.uncertain = torch.empty(rows, cols, dtype=torch.bool, device=device)
        self.counter = torch.empty(rows, cols, dtype=torch.uint8, device=device)


def _block_ranking(exact, block, work: _Workspace, bound) -> Ranking:
    """The :class:`Ranking` of the queries ``block`` from the approximate distances, the masks
    of their relevant and other (irrelevant, searchable) references in ``work``, the rounding
    bound of each row and ``exact`` (an :class:`_ExactPairs`); module docstring, steps 2-3."""
    n = len(block)
    approx, relevant, other = work.approx[:n], work.relevant[:n], work.other[:n]
    # the relevant references of each row in columns (padded with +inf), exact and approximate
    row, col = relevant.nonzero(as_tuple=True)
    r = torch.bincount(row, minlength=n)
    width = max(1, int(r.max()) if n else 1)
    slot = torch.arange(len(row), device=row.device) - (r.cumsum(0) - r)[row]
    valid = torch.zeros(n, width, dtype=torch.bool, device=row.device)
    valid[row, slot] = True
    rel_exact = torch.full((n, width), math.inf, dtype=torch.float64, device=row.device)
    rel_exact[row, slot] = exact(block[row], col)
    rel_approx = torch.full_like(rel_exact, math.inf)
    rel_approx[row, slot] = approx[row, col]
    hits = torch.searchsorted(rel_exact.sort(1).values, rel_exact, right=True)
    # An irrelevant l is certainly ahead of the relevant j when A_il + 2B < A_ij. With the A_ij of
    # a row sorted, ``slots`` = #{j : A_ij <= A_il + 2B}: l is certainly ahead of the sorted
    # slots from there on, and uncertain when the last slot before is within 2B of A_il too.
    sorted_approx, order = rel_approx.sort(1)
    margin = 2 * bound[:, None]
    high, slots, uncertain = work.scratch[:n], work.slots[:n], work.uncertain[:n]
    torch.add(approx, margin, out=high)
    _count_at_or_below(sorted_approx, high, slots, work.counter[:n])
    below = torch.cat([torch.full_like(sorted_approx[:, :1], -math.inf), sorted_approx], 1)
    torch.gather(below, 1, slots, out=approx)  # the last slot at or below A_il + 2B
    approx.add_(2 * margin)
    torch.ge(approx, high, out=uncertain)  # that slot's A_ij >= A_il - 2B
    uncertain.logical_and_(other)
    slots.masked_fill_(uncertain | ~other, width + 1)  # counted exactly, or not at all
    counts = torch.zeros(n, width + 2, dtype=torch.int64, device=row.device)
    counts.scatter_add_(
        1, slots, torch.ones(1, dtype=torch.int64, device=row.device).expand_as(slots)
    )
    ahead_sorted = counts.cumsum(1)[:, :width].to(torch.float64)
    ahead = torch.empty_like(ahead_sorted).scatter_(1, order, ahead_sorted)
    # the uncertain irrelevant references, compared exactly
    u_row, u_col = uncertain.nonzero(as_tuple=True)
    if len(u_row):
        u_count = torch.bincount(u_row, minlength=n)
        u_slot = torch.arange(len(u_row), device=row.device) - (u_count.cumsum(0) - u_count)[u_row]
        near = torch.full((n, int(u_count.max())), math.inf, dtype=torch.float64, device=row.device)
        near[u_row, u_slot] = exact(block[u_row], u_col)
        ahead += torch.searchsorted(near.sort(1).values, rel_exact, right=True)
    hits = hits.to(torch.float64)
    return Ranking(hits, hits + ahead, valid, r.to(torch.float64))


def _count_at_or_below(sorted_rows, values, out, counter) -> None:
    """``out`` [n, N] = the number of entries of each sorted row of ``sorted_rows`` [n, w] that
    are <= each of ``values`` [n, N]: ``searchsorted``, or for narrow rows (w <=
    :data:`_COMPARE_WIDTH`, most classes) w comparisons counted in ``counter`` (uint8), about
    twice as fast on a CPU."""
    width = sorted_rows.shape[1]
    if width > _COMPARE_WIDTH:
        torch.searchsorted(sorted_rows, values, right=True, out=out)
        return
    counter.zero_()
    for k in range(width):
        counter.add_(values >= sorted_rows[:, k : k + 1])
    out.copy_(counter)


class _ExactPairs:
    """The float64 exact squared distances of (query row, reference) pairs
    (:func:`~gspdml.evaluation.exact_knn.exact_squared_distances`), computed once per (query,
    distinct reference vector), in pieces within ``budget`` bytes."""

    def __init__(self, q64, r64, budget):
        self.q64, self.r64 = q64, r64
        self.groups = _identical_rows(r64)
        self.step = max(1, int(budget) // (q64.shape[1] * 8 * 4))

    def __call__(self, rows: torch.Tensor, refs: torch.Tensor) -> torch.Tensor:
        pairs, inverse = torch.unique(
            torch.stack([rows, self.groups.of[refs]]), dim=1, return_inverse=True
        )
        first = self.groups.first[pairs[1]]
        values = [torch.empty(0, dtype=torch.float64, device=rows.device)] + [
            exact_squared_distances(
                self.q64[pairs[0, s : s + self.step]], self.r64, first[s : s + self.step, None]
            )[:, 0]
            for s in range(0, pairs.shape[1], self.step)
        ]
        return torch.cat(values)[inverse]

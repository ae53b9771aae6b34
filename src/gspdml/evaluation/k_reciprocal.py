"""k-reciprocal re-ranking (Zhong, Zheng, Cao & Li, "Re-ranking person re-identification with
k-reciprocal encoding", CVPR 2017, §3), in bounded memory; the post-processing step
:class:`gspdml.evaluation.postprocess.KReciprocalReranking` applies it to a search.

Over all items (queries and database; the database alone in leave-one-out retrieval), with d the
squared Euclidean distance and N(p, k) = p and its k nearest other items:

- R(p, k) = {g in N(p, k) : p in N(g, k)}  (eq. 4);
- R*(p, k) = R(p, k) ∪ R(q, k/2) for each q in R(p, k) with
  |R(p, k) ∩ R(q, k/2)| >= 2/3 |R(q, k/2)|  (eq. 6, k/2 rounded);
- V_p[g] = exp(-d(p, g)) for g in R*(p, k1), else 0  (eq. 7);
- local query expansion V_p <- mean of V_g over g in N(p, k2 - 1)  (eq. 9, k2 items);
- d_J(p, g) = 1 - sum_j min(V_p[j], V_g[j]) / sum_j max(V_p[j], V_g[j])  (eq. 10-11);
- d*(p, g) = (1 - lambda) d_J(p, g) + lambda d(p, g)  (eq. 12).

V is sparse (|R*| ~ k1 entries a row), so no N x N matrix is held. The authors' released code
departs from these equations (each row of d divided by its largest entry, the weights of eq. 7
divided by their sum, a strict > in eq. 6); gspdml follows the paper, docs/paper-vs-code.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.exact_knn import exact_squared_distances, knn

if TYPE_CHECKING:
    import scipy.sparse

_BLOCK = 4096


def reciprocal_sets(neighbours: torch.Tensor, k: int) -> torch.Tensor:
    """R(p, k) for every item as a padded [N, k + 1] array (-1 = no member), from
    ``neighbours`` [N, >= k + 1]: each item first, then its nearest others."""
    top = neighbours[:, : k + 1]
    out = torch.full_like(top, -1)
    items = torch.arange(len(top))
    for s in range(0, len(top), _BLOCK):
        block = top[s : s + _BLOCK]
        reciprocal = (top[block] == items[s : s + _BLOCK, None, None]).any(-1)
        out[s : s + _BLOCK] = torch.where(reciprocal, block, -1)
    return out


def expanded_sets(neighbours: torch.Tensor, k1: int) -> list[np.ndarray]:
    """R*(p, k1) of every item (eq. 6), each as a sorted array of item numbers."""
    full, half = reciprocal_sets(neighbours, k1), reciprocal_sets(neighbours, max(1, round(k1 / 2)))
    half_size = (half >= 0).sum(1)
    out = []
    for s in range(0, len(full), _BLOCK // 8):
        rp = full[s : s + _BLOCK // 8]  # [b, k1 + 1]
        cand = half[rp.clamp(min=0)]  # [b, k1 + 1, h + 1]: R(q, k1/2) for q in R(p, k1)
        shared = (
            ((cand[..., None] == rp[:, None, None, :]) & (cand[..., None] >= 0)).any(-1).sum(-1)
        )
        accept = (rp >= 0) & (3 * shared >= 2 * half_size[rp.clamp(min=0)])
        members = torch.cat([rp, torch.where(accept[..., None], cand, -1).flatten(1)], 1).numpy()
        out += [np.unique(row[row >= 0]) for row in members]
    return out


def _encoding(
    x: torch.Tensor, sets: list[np.ndarray], neighbours: torch.Tensor, k2: int
) -> scipy.sparse.csr_matrix:
    """V after local query expansion (eq. 7 and 9), sparse [N, N]."""
    import scipy.sparse  # ~0.2 s to import: only when re-ranking runs

    rows = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    cols, step = np.concatenate(sets), _BLOCK * 8
    d = torch.cat(
        [
            exact_squared_distances(
                x[rows[i : i + step]], x, torch.from_numpy(cols[i : i + step])[:, None]
            )[:, 0]
            for i in range(0, len(cols), step)
        ]
    )
    v = scipy.sparse.csr_matrix((np.exp(-d.numpy()), (rows, cols)), shape=(len(x), len(x)))
    if k2 <= 1:
        return v
    near = neighbours[:, :k2].numpy()
    average = scipy.sparse.csr_matrix(
        (np.full(near.size, 1.0 / k2), (np.repeat(np.arange(len(x)), k2), near.ravel())),
        shape=v.shape,
    )
    return (average @ v).tocsr()


def _min_sums(v: scipy.sparse.csr_matrix, p: np.ndarray, g: torch.Tensor) -> torch.Tensor:
    """sum_j min(V_p[j], V_g[j]) for the pairs (p [n], g [n, m]): V_p dense for a block of
    probes, each V_g as its padded non-zeros (columns, values), gathered from V_p."""
    counts = np.diff(v.indptr)
    width = max(1, int(counts.max()))
    cols = torch.full((v.shape[0], width), v.shape[1], dtype=torch.int32)  # pad: a zero column
    vals = torch.zeros(v.shape[0], width, dtype=torch.float64)
    slot = np.arange(v.nnz) - np.repeat(v.indptr[:-1], counts)
    row = np.repeat(np.arange(v.shape[0]), counts)
    cols[row, slot] = torch.from_numpy(v.indices.astype(np.int32))
    vals[row, slot] = torch.from_numpy(v.data)
    per_block = max(1, min(_BLOCK, (64 * 2**20) // (8 * max(v.shape[1], g.shape[1] * width * 3))))
    out = torch.empty(g.shape, dtype=torch.float64)
    for s in range(0, len(p), per_block):
        rows = p[s : s + per_block]
        dense = torch.zeros(len(rows), v.shape[1] + 1, dtype=torch.float64)
        dense[:, :-1] = torch.from_numpy(v[rows].toarray())
        gc, gv = cols[g[s : s + per_block]].long(), vals[g[s : s + per_block]]
        seen = dense.gather(1, gc.flatten(1)).view(gc.shape)
        out[s : s + per_block] = torch.minimum(seen, gv).sum(-1)
    return out


def k_reciprocal_rerank(
    query: torch.Tensor,
    database: torch.Tensor,
    candidates: torch.Tensor,
    k1: int,
    k2: int,
    lam: float,
    leave_one_out: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(d* [Nq, m] float64, candidates re-ordered)``: the candidates [Nq, m] (database rows) of
    each query re-ranked by d* (module docstring), ties by row."""
    items = database if leave_one_out else torch.cat([database, query])
    n_items = len(items)
    if n_items <= k1:
        raise ConfigError(
            "k_reciprocal.k1", f"must be below the number of items {n_items}, got {k1}"
        )
    _, others = knn(items, None, k1)
    neighbours = torch.cat([torch.arange(n_items)[:, None], others], 1)
    v = _encoding(items, expanded_sets(neighbours, k1), neighbours, k2)
    probe = np.arange(len(query)) + (0 if leave_one_out else len(database))
    both = _min_sums(v, probe, candidates)
    mass = torch.from_numpy(np.asarray(v.sum(1)).ravel())
    jaccard = 1.0 - both / (mass[probe][:, None] + mass[candidates] - both)
    d = exact_squared_distances(query, database, candidates)
    final = (1.0 - lam) * jaccard + lam * d
    order = torch.argsort(candidates, dim=1)
    final, candidates = final.gather(1, order), candidates.gather(1, order)
    final, order = final.sort(dim=1, stable=True)
    return final, candidates.gather(1, order)

"""Retrieval post-processing, each step scored by the exact kNN engine.

Steps (applied in this order, each optional; every one works on L2-normalised embeddings and
searches with :func:`gspdml.evaluation.exact_knn.knn`, so no N x N matrix is ever held):

1. **PCA-whitening** learned on training embeddings X (Jégou & Chum, "Negative evidences and
   co-occurrences in image retrieval: the benefit of PCA and whitening", ECCV 2012, §2):
   with mu the mean of X and (1/n) sum (x - mu)(x - mu)^T = U diag(lambda) U^T,

       x_hat = P (x - mu) / ||P (x - mu)||,   P = diag(lambda_1..d + eps)^(-1/2) U_d^T

   (d leading components; eps = 1e-6 lambda_1 keeps near-empty directions finite).
2. **alpha-DBA**, database-side augmentation (Radenović, Tolias & Chum, "Fine-tuning CNN image
   retrieval with no human annotation", TPAMI 2018, §5.3 "alpha-weighted query expansion",
   applied to every database vector): with N_k(x) the k nearest database vectors other than x,

       x' = normalise( x + sum_{y in N_k(x)} max(x.y, 0)^alpha y ).

3. **alpha-QE**, query expansion (same paper and equation) against the (augmented) database:
   q' = normalise( q + sum_{y in N_k(q)} max(q.y, 0)^alpha y ); in leave-one-out retrieval the
   query's own database row is not one of its N_k(q).
4. **k-reciprocal re-ranking** (Zhong, Zheng, Cao & Li, "Re-ranking person re-identification with
   k-reciprocal encoding", CVPR 2017, §3) over all items (queries and database; the database
   alone in leave-one-out retrieval), with d the squared Euclidean distance and N(p, k) = p and
   its k nearest other items:

   - R(p, k) = {g in N(p, k) : p in N(g, k)}  (eq. 4);
   - R*(p, k) = R(p, k) ∪ R(q, k/2) for each q in R(p, k) with
     |R(p, k) ∩ R(q, k/2)| >= 2/3 |R(q, k/2)|  (eq. 6, k/2 rounded);
   - V_p[g] = exp(-d(p, g)) for g in R*(p, k1), else 0  (eq. 7);
   - local query expansion V_p <- mean of V_g over g in N(p, k2 - 1)  (eq. 9, k2 items);
   - d_J(p, g) = 1 - sum_j min(V_p[j], V_g[j]) / sum_j max(V_p[j], V_g[j])  (eq. 10-11);
   - d*(p, g) = (1 - lambda) d_J(p, g) + lambda d(p, g)  (eq. 12).

   d* re-ranks each query's ``shortlist`` nearest database items (bounded memory: V is sparse,
   |R*| ~ k1 entries a row); the other items keep their order after them.

The result is a :class:`~gspdml.evaluation.results.RetrievalResults` whose distances are those
the final ranking used (squared Euclidean, or d* after k-reciprocal re-ranking).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import scipy.sparse
import torch
import torch.nn.functional as F

from gspdml.errors import ConfigError
from gspdml.evaluation.exact_knn import exact_squared_distances, knn
from gspdml.evaluation.results import RetrievalResults, encode_labels, relevant_counts

#: step name -> its options and their defaults (the order is the order of application)
STEPS: dict[str, dict[str, Any]] = {
    "pca_whiten": {"dim": None},
    "dba": {"k": 2, "alpha": 3.0},
    "qe": {"k": 2, "alpha": 3.0},
    "k_reciprocal": {"k1": 20, "k2": 6, "lambda": 0.3, "shortlist": 100},
}
_BLOCK = 4096


def parse_steps(steps: Sequence[Any], field: str = "evaluation.postprocess") -> list[dict[str, Any]]:
    """Validated steps with their defaults filled in, in the order of application.

    Each step is a name (``"qe"``) or a mapping ``{"name": "qe", "k": 3, "alpha": 3}``; the
    command-line form ``"qe:k=3,alpha=3"`` is accepted too.
    """
    if not isinstance(steps, (list, tuple)):
        raise ConfigError(field, f"expected a list of steps ({', '.join(STEPS)}), got {steps!r}")
    parsed = {}
    for step in steps:
        spec = _step_mapping(step, field)
        name = spec.pop("name", None)
        if name not in STEPS:
            raise ConfigError(field, f"unknown post-processing step {name!r}; allowed: {', '.join(STEPS)}")
        if name in parsed:
            raise ConfigError(field, f"step {name!r} given twice")
        unknown = set(spec) - set(STEPS[name])
        if unknown:
            raise ConfigError(f"{field}.{name}", f"unknown option(s) {sorted(unknown)}; allowed: {sorted(STEPS[name])}")
        options = {**STEPS[name], **spec}
        _check_options(name, options, f"{field}.{name}")
        parsed[name] = {"name": name, **options}
    return [parsed[name] for name in STEPS if name in parsed]


def _step_mapping(step, field) -> dict:
    if isinstance(step, Mapping):
        return dict(step)
    if not isinstance(step, str):
        raise ConfigError(field, f"a step is a name or a mapping, got {step!r}")
    name, _, rest = step.partition(":")
    spec = {"name": name.strip()}
    for item in filter(None, rest.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(field, f"{step!r}: expected key=value, got {item!r}")
        try:
            spec[key.strip()] = None if value.strip() == "none" else float(value) if "." in value else int(value)
        except ValueError:
            raise ConfigError(field, f"{step!r}: {key.strip()} must be a number, got {value!r}") from None
    return spec


def _check_options(name, options, field) -> None:
    for key, value in options.items():
        if key == "dim" and value is None:
            continue
        integer = key in ("dim", "k", "k1", "k2", "shortlist")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
            raise ConfigError(f"{field}.{key}", f"expected {'an integer' if integer else 'a number'}, got {value!r}")
        low = 0.0 if key in ("alpha", "lambda") else 1
        if value < low or (key == "lambda" and value > 1):
            raise ConfigError(f"{field}.{key}", f"must be {'in [0, 1]' if key == 'lambda' else f'>= {low}'}, got {value}")


# --- 1. PCA-whitening ------------------------------------------------------------------------


@dataclass
class PCAWhitening:
    """x -> normalise(P (x - mean)), learned by :meth:`fit` (module docstring, step 1)."""

    mean: torch.Tensor
    projection: torch.Tensor  # P [d, D]

    @classmethod
    def fit(cls, train, dim: Optional[int] = None) -> "PCAWhitening":
        x = torch.as_tensor(train).double()
        if x.ndim != 2 or len(x) < 2:
            raise ConfigError("pca_whiten", f"needs training embeddings [n >= 2, D], got shape {tuple(x.shape)}")
        dim = x.shape[1] if dim is None else int(dim)
        if not 1 <= dim <= x.shape[1]:
            raise ConfigError("pca_whiten.dim", f"must be between 1 and the embedding dimension {x.shape[1]}, got {dim}")
        mean = x.mean(0)
        centred = x - mean
        eigenvalues, eigenvectors = torch.linalg.eigh(centred.T @ centred / len(x))
        eigenvalues, eigenvectors = eigenvalues.flip(0)[:dim], eigenvectors.flip(1)[:, :dim]
        scale = (eigenvalues.clamp(min=0) + 1e-6 * eigenvalues[0].clamp(min=1e-12)).rsqrt()
        return cls(mean, scale[:, None] * eigenvectors.T)

    def __call__(self, x) -> torch.Tensor:
        out = [F.normalize((torch.as_tensor(x[i:i + 65536]).double() - self.mean) @ self.projection.T, dim=1)
               for i in range(0, len(x), 65536)]
        return torch.cat(out).float()


# --- 2-3. alpha-weighted expansion --------------------------------------------------------------


def alpha_expand(x: torch.Tensor, database: torch.Tensor, k: int, alpha: float, leave_one_out: bool) -> torch.Tensor:
    """normalise(x + sum_{y in N_k(x)} max(x.y, 0)^alpha y) for unit rows x against the unit
    ``database`` (module docstring, steps 2-3); ``leave_one_out``: x is the database and row i
    is not its own neighbour."""
    _, rows = knn(x, None if leave_one_out else database, k)
    out = torch.empty_like(x)
    for s in range(0, len(x), _BLOCK):
        xs, neighbours = x[s:s + _BLOCK], database[rows[s:s + _BLOCK]]
        weights = torch.einsum("nd,nkd->nk", xs, neighbours).clamp(min=0).pow(alpha)
        out[s:s + _BLOCK] = F.normalize(xs + torch.einsum("nk,nkd->nd", weights, neighbours), dim=1)
    return out


# --- 4. k-reciprocal re-ranking -----------------------------------------------------------------


def reciprocal_sets(neighbours: torch.Tensor, k: int) -> torch.Tensor:
    """R(p, k) for every item as a padded [N, k + 1] array (-1 = no member), from
    ``neighbours`` [N, >= k + 1]: each item first, then its nearest others."""
    top = neighbours[:, :k + 1]
    out = torch.full_like(top, -1)
    items = torch.arange(len(top))
    for s in range(0, len(top), _BLOCK):
        block = top[s:s + _BLOCK]
        reciprocal = (top[block] == items[s:s + _BLOCK, None, None]).any(-1)
        out[s:s + _BLOCK] = torch.where(reciprocal, block, -1)
    return out


def expanded_sets(neighbours: torch.Tensor, k1: int) -> list[np.ndarray]:
    """R*(p, k1) of every item (eq. 6), each as a sorted array of item numbers."""
    full, half = reciprocal_sets(neighbours, k1), reciprocal_sets(neighbours, max(1, round(k1 / 2)))
    half_size = (half >= 0).sum(1)
    out = []
    for s in range(0, len(full), _BLOCK // 8):
        rp = full[s:s + _BLOCK // 8]  # [b, k1 + 1]
        cand = half[rp.clamp(min=0)]  # [b, k1 + 1, h + 1]: R(q, k1/2) for q in R(p, k1)
        shared = ((cand[..., None] == rp[:, None, None, :]) & (cand[..., None] >= 0)).any(-1).sum(-1)
        accept = (rp >= 0) & (3 * shared >= 2 * half_size[rp.clamp(min=0)])
        members = torch.cat([rp, torch.where(accept[..., None], cand, -1).flatten(1)], 1).numpy()
        out += [np.unique(row[row >= 0]) for row in members]
    return out


def _encoding(x: torch.Tensor, sets: list[np.ndarray], neighbours: torch.Tensor, k2: int) -> scipy.sparse.csr_matrix:
    """V after local query expansion (eq. 7 and 9), sparse [N, N]."""
    rows = np.repeat(np.arange(len(sets)), [len(s) for s in sets])
    cols = np.concatenate(sets)
    d = torch.cat([exact_squared_distances(x[rows[i:i + _BLOCK * 8]], x, torch.from_numpy(cols[i:i + _BLOCK * 8])[:, None])[:, 0]
                   for i in range(0, len(cols), _BLOCK * 8)])
    v = scipy.sparse.csr_matrix((np.exp(-d.numpy()), (rows, cols)), shape=(len(x), len(x)))
    if k2 <= 1:
        return v
    near = neighbours[:, :k2].numpy()
    average = scipy.sparse.csr_matrix((np.full(near.size, 1.0 / k2), (np.repeat(np.arange(len(x)), k2), near.ravel())), shape=v.shape)
    return (average @ v).tocsr()


def _min_sums(v: scipy.sparse.csr_matrix, p: np.ndarray, g: np.ndarray) -> torch.Tensor:
    """sum_j min(V_p[j], V_g[j]) for the pairs (p [n], g [n, m]): V_p dense for a block of
    probes, each V_g as its padded non-zeros (columns, values), gathered from V_p."""
    counts = np.diff(v.indptr)
    width = max(1, int(counts.max()))
    cols = torch.full((v.shape[0], width), v.shape[1], dtype=torch.int32)  # padding: an all-zero column
    vals = torch.zeros(v.shape[0], width, dtype=torch.float64)
    slot = np.arange(v.nnz) - np.repeat(v.indptr[:-1], counts)
    row = np.repeat(np.arange(v.shape[0]), counts)
    cols[row, slot] = torch.from_numpy(v.indices.astype(np.int32))
    vals[row, slot] = torch.from_numpy(v.data)
    g = torch.from_numpy(g)
    per_block = max(1, min(_BLOCK, (64 * 2**20) // (8 * max(v.shape[1], g.shape[1] * width * 3))))
    out = torch.empty(g.shape, dtype=torch.float64)
    for s in range(0, len(p), per_block):
        rows = p[s:s + per_block]
        dense = torch.zeros(len(rows), v.shape[1] + 1, dtype=torch.float64)
        dense[:, :-1] = torch.from_numpy(v[rows].toarray())
        gc, gv = cols[g[s:s + per_block]].long(), vals[g[s:s + per_block]]
        seen = dense.gather(1, gc.flatten(1)).view(gc.shape)
        out[s:s + per_block] = torch.minimum(seen, gv).sum(-1)
    return out


def k_reciprocal_rerank(query, database, candidates: torch.Tensor, k1: int, k2: int, lam: float,
                        leave_one_out: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(d* [Nq, m] float64, candidates re-ordered)``: the candidates [Nq, m] (database rows) of
    each query re-ranked by d* (module docstring, step 4), ties by row."""
    items = database if leave_one_out else torch.cat([database, query])
    n_items = len(items)
    if n_items <= k1:
        raise ConfigError("k_reciprocal.k1", f"must be below the number of items {n_items}, got {k1}")
    _, others = knn(items, None, k1)
    neighbours = torch.cat([torch.arange(n_items)[:, None], others], 1)
    v = _encoding(items, expanded_sets(neighbours, k1), neighbours, k2)
    probe = np.arange(len(query)) + (0 if leave_one_out else len(database))
    cand = candidates.numpy()
    both = _min_sums(v, probe, cand)
    mass = torch.from_numpy(np.asarray(v.sum(1)).ravel())
    jaccard = 1.0 - both / (mass[probe][:, None] + mass[candidates] - both)
    d = exact_squared_distances(query, database, candidates)
    final = (1.0 - lam) * jaccard + lam * d
    order = torch.argsort(candidates, dim=1)
    final, candidates = final.gather(1, order), candidates.gather(1, order)
    final, order = final.sort(dim=1, stable=True)
    return final, candidates.gather(1, order)


# --- the pipeline ------------------------------------------------------------------------------------


def postprocessed_retrieve(query, query_labels, reference=None, reference_labels=None, *, steps: Sequence[Any] = (),
                           train=None, min_k: int = 1) -> RetrievalResults:
    """Exact retrieval (leave-one-out when ``reference`` is None) after the post-processing
    ``steps`` (:func:`parse_steps`); ``train`` are the training embeddings that PCA-whitening
    learns on. k is chosen as in :func:`gspdml.evaluation.exact_knn.retrieve` (max R_i, at least
    ``min_k``), at least the shortlist when re-ranking."""
    steps = {s["name"]: s for s in parse_steps(list(steps))}
    loo = reference is None
    values, q_codes, r_codes = encode_labels(query_labels, None if loo else reference_labels)
    excluded = torch.arange(len(q_codes)) if loo else None
    q = F.normalize(torch.as_tensor(query).float(), dim=1)
    r = q if loo else F.normalize(torch.as_tensor(reference).float(), dim=1)
    if len(q) != len(q_codes) or len(r) != len(r_codes):
        raise ConfigError("labels", f"{len(q_codes)} query and {len(r_codes)} reference labels for {len(q)} and {len(r)} embeddings")
    if "pca_whiten" in steps:
        if train is None:
            raise ConfigError("pca_whiten", "needs the training embeddings to learn the whitening on")
        whiten = PCAWhitening.fit(train, steps["pca_whiten"]["dim"])
        q = whiten(q)
        r = q if loo else whiten(r)
    if "dba" in steps:
        r = alpha_expand(r, r, steps["dba"]["k"], steps["dba"]["alpha"], leave_one_out=True)
        q = r if loo else q
    if "qe" in steps:
        q = alpha_expand(q, r, steps["qe"]["k"], steps["qe"]["alpha"], leave_one_out=loo)
    n_ref = len(r) - int(loo)
    r_max = int(relevant_counts(q_codes, r_codes, len(values), excluded).max()) if len(q_codes) else 0
    k = min(max(r_max, int(min_k), 1), n_ref)
    kr = steps.get("k_reciprocal")
    if kr:
        k = min(max(k, kr["shortlist"]), n_ref)
    distances, indices = _nearest(q, r, loo, k)
    if kr:
        distances, indices = k_reciprocal_rerank(q, r, indices, kr["k1"], kr["k2"], kr["lambda"], loo)
    return RetrievalResults(indices, distances, q_codes, r_codes, values, excluded=excluded)


def _nearest(q, r, loo, k):
    """Exact k nearest rows of r for each row of q; in leave-one-out retrieval row i of r is not
    a neighbour of query i (q is r, or q was expanded from r)."""
    if not loo or q is r:
        return knn(q, None if loo else r, k)
    distances, rows = knn(q, r, k + 1)
    keep = rows != torch.arange(len(q))[:, None]
    keep[keep.all(1), -1] = False
    return distances[keep].view(len(q), k), rows[keep].view(len(q), k)


def needs_training_embeddings(steps: Sequence[Any]) -> bool:
    return any(step["name"] == "pca_whiten" for step in parse_steps(list(steps)))


def postprocessed_metrics(query, query_labels, gallery=None, gallery_labels=None, *, steps: Sequence[Any] = (),
                          train=None, recall_at: Sequence[int] = (1, 2, 4, 8)) -> dict[str, float]:
    """Flattened retrieval metrics (:func:`gspdml.evaluation.split_metrics.flatten_metrics`) of
    embeddings after the post-processing ``steps``: leave-one-out when ``gallery`` is None, else
    query -> gallery; ``train``: the training embeddings PCA-whitening learns on (None when no
    step needs them, :func:`needs_training_embeddings`). The one scoring path of the final
    evaluation (:func:`postprocessed_split_metrics`) and of the trainer's validation rounds."""
    from gspdml.evaluation.metrics import metrics_from_results
    from gspdml.evaluation.split_metrics import flatten_metrics

    results = postprocessed_retrieve(query, query_labels, gallery, gallery_labels, steps=steps, train=train,
                                     min_k=max(recall_at, default=1))
    return flatten_metrics(metrics_from_results(results, recall_at=recall_at))


def postprocessed_split_metrics(model, data, split, steps: Sequence[Any], *, batch_size: int = 256,
                                recall_at: Sequence[int] = (1, 2, 4, 8)) -> dict[str, float]:
    """Flattened retrieval metrics of ``model`` on an evaluation ``split`` of ``data`` (a
    :class:`~gspdml.data.base.DataSplits`) after the post-processing ``steps``; PCA-whitening
    learns on the embeddings of ``data.train`` (as the data section builds it)."""
    from gspdml.models.inference import embed, split_embeddings

    query, query_labels, gallery, gallery_labels = split_embeddings(model, split, batch_size=batch_size)
    train = embed(model, data.train, batch_size=batch_size)[0] if needs_training_embeddings(steps) else None
    return postprocessed_metrics(query, query_labels, gallery, gallery_labels, steps=steps, train=train, recall_at=recall_at)

"""open-metric-learning's ``calc_retrieval_metrics`` (``oml.functional.metrics``) on gspdml's
registered metrics.

For query i with the retrieved gallery ids r_i (nearest first, n_i of them), the relevant ids
g_i (|g_i| of them), rel_i(j) = [r_i(j) in g_i] and k_i = min(k, n_i), as OML defines them:

- ``cmc@k`` = 1 if some j <= k has rel_i(j) = 1 (gspdml's ``recall_at``);
- ``precision@k`` = (sum_{j<=k_i} rel_i(j)) / min(k_i, |g_i|) (``precision_capped_at_k`` with
  R_i = min(|g_i|, n_i));
- ``map@k`` = (1/h) sum_{j<=k_i} rel_i(j) P_i(j), h = sum_{j<=k_i} rel_i(j), 0 when h = 0
  (``map_hits_at_k``).

OML's values where a query has nothing to score are kept: a query that retrieved nothing scores
1 when it has no relevant id and 0 otherwise (each metric); a query with no relevant id that
retrieved something scores 0 (cmc, map) and NaN (precision: 0/0). Values are float32 tensors,
per query with ``reduce=False``, their means otherwise; ``query_categories`` adds one entry per
category beside ``"OVERALL"``, as OML does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import numpy as np
import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.metric_registry import METRICS, Neighbours

#: OML's key of the metrics over every query when categories are given
OVERALL_CATEGORIES_KEY = "OVERALL"
#: OML's metric name -> the registered gspdml metric it is
OML_METRICS = {"cmc": "recall_at", "precision": "precision_capped_at_k", "map": "map_hits_at_k"}


def calc_retrieval_metrics(
    retrieved_ids: Sequence[Any],
    gt_ids: Sequence[Any],
    query_categories: Optional[Any] = None,
    cmc_top_k: tuple[int, ...] = (5,),
    precision_top_k: tuple[int, ...] = (5,),
    map_top_k: tuple[int, ...] = (5,),
    reduce: bool = True,
    verbose: bool = True,
) -> dict[Any, Any]:
    """``{"cmc": {k: value}, "precision": {k: value}, "map": {k: value}}`` for the retrieved and
    relevant gallery ids of every query (module docstring); ``verbose`` is accepted and ignored
    (no progress bars)."""
    if len(retrieved_ids) != len(gt_ids):
        raise ConfigError(
            "gt_ids", f"has {len(gt_ids)} entries for {len(retrieved_ids)} retrieved lists"
        )
    if query_categories is not None and len(query_categories) != len(retrieved_ids):
        raise ConfigError(
            "query_categories",
            f"has {len(query_categories)} entries for {len(retrieved_ids)} queries",
        )
    cutoffs = {"cmc": cmc_top_k, "precision": precision_top_k, "map": map_top_k}
    for name, top_k in cutoffs.items():
        if top_k:
            _check_top_k(top_k, f"{name}_top_k")
    relevance, searched, num_gt = _relevance(retrieved_ids, gt_ids)
    n = Neighbours(relevance, torch.minimum(num_gt, searched))
    nothing = searched == 0
    metrics: dict[Any, Any] = {}
    for name, top_k in cutoffs.items():
        if top_k:
            metric = METRICS[OML_METRICS[name]]
            metrics[name] = {
                K: torch.where(nothing, (num_gt == 0).double(), metric.score(n, K)).float()
                for K in top_k
            }
    if query_categories is not None:
        categories = np.asarray(
            query_categories.cpu()
            if isinstance(query_categories, torch.Tensor)
            else query_categories
        )
        by_category = {
            c.item() if isinstance(c, np.generic) else c: _select(metrics, categories == c)
            for c in categories.tolist()
        }
        metrics = {OVERALL_CATEGORIES_KEY: metrics, **by_category}
    return _mean(metrics) if reduce else metrics


def flatten_dict(
    d: dict[Any, Any], parent_key: str = "", sep: str = "/", ignored_keys: Iterable[str] = ()
) -> dict[str, Any]:
    """Nested metrics as one level with joined keys, as OML logs them: ``{"cmc": {1: v}}`` ->
    ``{"cmc/1": v}``."""
    out: dict[str, Any] = {}
    for key, value in d.items():
        if key in ignored_keys:
            continue
        joined = f"{parent_key}{sep}{key}" if parent_key else str(key)
        if isinstance(value, dict):
            out.update(flatten_dict(value, joined, sep, ignored_keys))
        else:
            out[joined] = value
    return out


def _check_top_k(top_k: int | Sequence[int], field: str) -> None:
    """OML's check: a non-empty sequence of positive integers."""
    values = list(top_k) if isinstance(top_k, (list, tuple)) else [top_k]
    if not values or not all(
        isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in values
    ):
        raise ConfigError(field, f"expected non-empty positive integers, got {top_k!r}")


def _relevance(
    retrieved_ids: Sequence[Any], gt_ids: Sequence[Any]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """bool [N, max n_i] rel_i(j) (False beyond n_i), n_i and |g_i| (int64 [N])."""
    retrieved = [torch.as_tensor(r, dtype=torch.int64).reshape(-1) for r in retrieved_ids]
    relevant = [torch.as_tensor(g, dtype=torch.int64).reshape(-1) for g in gt_ids]
    searched = torch.tensor([len(r) for r in retrieved], dtype=torch.int64)
    num_gt = torch.tensor([len(g) for g in relevant], dtype=torch.int64)
    width = int(searched.max()) if len(searched) else 0
    relevance = torch.zeros(len(retrieved), width, dtype=torch.bool)
    if width:
        # one (query, id) key per pair: membership of every retrieved id in one isin
        empty = torch.zeros(0, dtype=torch.int64)
        ids = torch.cat([*retrieved, *relevant, empty])
        base = int(ids.max()) - int(ids.min()) + 1 if len(ids) else 1
        low = int(ids.min()) if len(ids) else 0
        rows_r = torch.repeat_interleave(torch.arange(len(retrieved)), searched)
        rows_g = torch.repeat_interleave(torch.arange(len(relevant)), num_gt)
        key_r = rows_r * base + (torch.cat([*retrieved, empty]) - low)
        key_g = rows_g * base + (torch.cat([*relevant, empty]) - low)
        column = torch.arange(len(rows_r)) - (searched.cumsum(0) - searched)[rows_r]
        relevance[rows_r, column] = torch.isin(key_r, key_g)
    return relevance, searched, num_gt


def _select(metrics: dict[Any, Any], mask: np.ndarray) -> dict[Any, Any]:
    rows = torch.from_numpy(np.asarray(mask, dtype=bool))
    return {k: _select(v, mask) if isinstance(v, dict) else v[rows] for k, v in metrics.items()}


def _mean(metrics: dict[Any, Any]) -> dict[Any, Any]:
    return {
        k: _mean(v) if isinstance(v, dict) else (v.mean() if len(v) else torch.tensor(math.nan))
        for k, v in metrics.items()
    }

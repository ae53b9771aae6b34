"""Ranking metrics of the composed-retrieval protocols: two average precisions, Recall@k, P@k.

Every function takes ``scores [Q, N]`` (higher = more similar) and ``relevant [Q, N]`` (bool) and
ranks the database per query by descending score; ties keep database order (a stable sort, like
``np.argsort(-s, kind="stable")`` in the numpy reference sandbox of tests/helpers/cir_sandbox.py). The whole
database is ranked; nothing is removed (the query image stays in the database: it is never a
positive in either protocol).

Two AP variants exist because the two chapters' official code differ (the thesis does not name the variant):

* ``"standard"`` — non-interpolated AP, the mean of precision@rank at every relevant rank
  (WeiCom/PatternCom, Psomas thesis §5.4.1 "the average of the precision values ... up to each relevant
  item"): with 0-based ranks ``r_0 < … < r_{P-1}`` of the P positives,
  ``AP = (1/P) Σ_j (j+1)/(r_j+1)``.
* ``"trapezoid"`` — the Radenović et al. (cirtorch ``compute_ap``) trapezoidal rule used by the
  FreeDom code for every mAP of chapter 4: ``AP = (1/P) Σ_j (p0_j + p1_j)/2`` with
  ``p0_j = j / r_j`` (1 when ``r_j = 0``) and ``p1_j = (j+1)/(r_j+1)``.

A query without positives gets AP 0 and recall 0 (the reference sandbox's convention); the
protocols of the thesis never produce one.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.ranked_ap import AP_VARIANTS, average_precision_ranked

__all__ = ["AP_VARIANTS", "average_precision_ranked"]  # re-exported: their home is evaluation


def _check(scores: torch.Tensor, relevant: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    scores = torch.as_tensor(scores)
    relevant = torch.as_tensor(relevant, dtype=torch.bool, device=scores.device)
    if scores.ndim == 1:
        scores, relevant = scores[None], relevant[None]
    if scores.ndim != 2 or scores.shape != relevant.shape:
        raise ConfigError(
            "relevant",
            f"expected scores [Q, N] and relevant [Q, N] of the same shape, got {tuple(scores.shape)} and {tuple(relevant.shape)}",
        )
    return scores, relevant


def ranked_relevance(scores: torch.Tensor, relevant: torch.Tensor) -> torch.Tensor:
    """``relevant`` reordered by descending score per row (stable: ties keep database order)."""
    scores, relevant = _check(scores, relevant)
    order = torch.sort(-scores, dim=1, stable=True).indices
    return torch.gather(relevant, 1, order)


def recall_at_k_ranked(ranked: torch.Tensor, ks: Iterable[int]) -> dict[int, torch.Tensor]:
    """``{k: [Q]}`` with R@k = (#positives in the top k) / (#positives) — the definition of the
    FreeDom and WeiCom code, not "at least one positive in the top k"."""
    positives = ranked.sum(dim=1).to(torch.float64)
    return {
        k: ranked[:, :k].sum(dim=1).to(torch.float64) / positives.clamp(min=1.0)
        for k in _check_ks(ks)
    }


def precision_at_k_ranked(
    ranked: torch.Tensor, ks: Iterable[int], capped: bool = True
) -> dict[int, torch.Tensor]:
    """``{k: [Q]}`` with P@k = (#positives in the top k) / min(#positives, k) when ``capped`` (the
    FreeDom code) or / k otherwise."""
    positives = ranked.sum(dim=1).to(torch.float64)
    out = {}
    for k in _check_ks(ks):
        denominator = (
            positives.clamp(max=float(k)) if capped else torch.full_like(positives, float(k))
        )
        out[k] = ranked[:, :k].sum(dim=1).to(torch.float64) / denominator.clamp(min=1.0)
    return out


def ranking_metrics(
    scores: torch.Tensor,
    relevant: torch.Tensor,
    ap: Iterable[str] = AP_VARIANTS,
    recall_at: Iterable[int] = (),
    precision_at: Iterable[int] = (),
) -> dict[str, torch.Tensor]:
    """Per-query metrics from one ranking: ``ap_<variant>``, ``recall@<k>``, ``precision@<k>``,
    each a float64 tensor ``[Q]`` (average them for mAP, mean R@k, …)."""
    ranked = ranked_relevance(scores, relevant)
    out = {f"ap_{variant}": average_precision_ranked(ranked, variant) for variant in ap}
    out.update({f"recall@{k}": v for k, v in recall_at_k_ranked(ranked, recall_at).items()})
    out.update(
        {f"precision@{k}": v for k, v in precision_at_k_ranked(ranked, precision_at).items()}
    )
    return out


def _check_ks(ks: Iterable[int]) -> list[int]:
    ks = [int(k) for k in ks]
    if any(k < 1 for k in ks):
        raise ConfigError("recall_at", f"every k must be >= 1, got {ks}")
    return ks

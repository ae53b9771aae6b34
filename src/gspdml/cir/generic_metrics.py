"""The official metrics of the generic composed-retrieval benchmarks (Psomas thesis Table 4.7,
§4.4.8; :mod:`gspdml.cir.generic_datasets`), beside the thesis' mAP over the whole ranking.

Every query ranks the database by descending score, ties in database order (a stable sort, as
:mod:`gspdml.cir.ranking`), its ``excluded`` images removed. With ``R_i`` = 1 when the item at
rank i (1-based) is a positive:

* Recall@K (Fashion-IQ, Wu et al. CVPR 2021; CIRR, Liu et al. ICCV 2021): 1 when a positive
  (the one target) is among the first K, else 0; averaged over the queries.
* Recall_subset@K (CIRR): the same over the ranking restricted to the query's image set (its
  ``subset``: the set's members, the reference removed): 1 when the target is among the first K
  of them.
* mAP@K (CIRCO, Baldrati et al. ICCV 2023), with P the number of ground truths:
  ``AP@K = Σ_{i≤K} R_i · (Σ_{j≤i} R_j / i) / min(P, K)``.

Metrics are in %, per group (a Fashion-IQ category; CIRR; CIRCO) and, at the top, the mean of
the groups, as the thesis averages Fashion-IQ's categories.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .composition_protocol import ScoreFunction, evaluate_protocol
from .generic_datasets import GenericBenchmark, GenericProtocol, GenericQuery, get_generic_benchmark
from .ranking import ranked_relevance


def exclude(scores: torch.Tensor, queries: Sequence[GenericQuery]) -> torch.Tensor:
    """``scores [Q, N]`` with each query's excluded database images at -inf (ranked last,
    never counted: they are never positives)."""
    scores = scores.clone()
    for row, query in enumerate(queries):
        scores[row, torch.as_tensor(query.excluded, dtype=torch.long)] = float("-inf")
    return scores


def recall_hit_at_k(ranked: torch.Tensor, ks: Sequence[int]) -> dict[int, torch.Tensor]:
    """``{K: [Q]}``: 1.0 where a positive is among the first K of the ranked relevance."""
    return {k: ranked[:, :k].any(dim=1).to(torch.float64) for k in ks}


def map_at_k(ranked: torch.Tensor, ks: Sequence[int]) -> dict[int, torch.Tensor]:
    """``{K: [Q]}``: CIRCO's AP@K of each query (module docstring) from the ranked relevance
    over the whole database (so P counts every positive)."""
    hits = ranked.to(torch.float64)
    positives = hits.sum(dim=1)
    ranks = torch.arange(1, hits.shape[1] + 1, dtype=torch.float64)
    precision = hits.cumsum(dim=1) / ranks * hits
    return {
        k: precision[:, :k].sum(dim=1) / positives.clamp(max=float(k)).clamp(min=1.0) for k in ks
    }


def recall_subset_at_k(
    scores: torch.Tensor, queries: Sequence[GenericQuery], ks: Sequence[int]
) -> dict[int, torch.Tensor]:
    """``{K: [Q]}``: CIRR's Recall_subset@K: the target's place among the query's ``subset``
    in the stable ranking of ``scores [Q, N]``."""
    order = torch.sort(-scores, dim=1, stable=True).indices
    place = torch.empty_like(order)
    place.scatter_(1, order, torch.arange(order.shape[1]).expand_as(order))
    before = torch.tensor(
        [
            int((place[row, torch.as_tensor(q.subset)] < place[row, int(q.positives[0])]).sum())
            for row, q in enumerate(queries)
        ]
    )
    return {k: (before < k).to(torch.float64) for k in ks}


def official_metrics(
    scores: torch.Tensor, queries: Sequence[GenericQuery], benchmark: GenericBenchmark
) -> dict[str, torch.Tensor]:
    """The per-query official metrics ``{name: [Q]}`` of ``benchmark`` (fractions) from the
    scores with the excluded images removed (:func:`exclude`)."""
    relevant = torch.zeros(scores.shape, dtype=torch.bool)
    for row, query in enumerate(queries):
        relevant[row, torch.as_tensor(query.positives, dtype=torch.long)] = True
    ranked = ranked_relevance(scores, relevant)
    out = {f"recall@{k}": v for k, v in recall_hit_at_k(ranked, benchmark.recall_at).items()}
    if benchmark.recall_subset_at:
        subset = recall_subset_at_k(scores, queries, benchmark.recall_subset_at)
        out.update({f"recall_subset@{k}": v for k, v in subset.items()})
    out.update({f"map@{k}": v for k, v in map_at_k(ranked, benchmark.map_at).items()})
    return out


def evaluate_generic(
    protocol: GenericProtocol, score: ScoreFunction, ap: str = "trapezoid", keep_top: int = 0
) -> dict[str, Any]:
    """:func:`~gspdml.cir.composition_protocol.evaluate_protocol` (mAP over the ranking, per
    group and their mean) with each query's excluded images removed, plus the benchmark's
    official metrics (:func:`official_metrics`) per group and their mean, in %."""
    benchmark = get_generic_benchmark(protocol.benchmark)
    per_query: dict[str, list[torch.Tensor]] = {}
    done = 0

    def excluded_score(images: torch.Tensor, texts: list[str]) -> torch.Tensor:
        nonlocal done  # evaluate_protocol scores the queries in order, chunk by chunk
        batch = protocol.queries[done : done + len(texts)]
        done += len(texts)
        queries = [q for q in batch if isinstance(q, GenericQuery)]
        scores = exclude(score(images, texts), queries)
        for name, values in official_metrics(scores, queries, benchmark).items():
            per_query.setdefault(name, []).append(values)
        return scores

    if not all(isinstance(q, GenericQuery) for q in protocol.queries):
        raise TypeError("a generic protocol holds GenericQuery queries only")
    result = evaluate_protocol(protocol, excluded_score, ap=ap, keep_top=keep_top)
    groups = np.array([q.group for q in protocol.queries])
    for name, parts in per_query.items():
        values = torch.cat(parts)
        for group, row in result["groups"].items():
            row[name] = 100.0 * values[torch.from_numpy(groups == group)].mean().item()
        result[name] = float(np.mean([row[name] for row in result["groups"].values()]))
    return result

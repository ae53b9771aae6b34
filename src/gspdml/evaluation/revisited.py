"""The revisited Oxford and Paris protocol (Radenović et al., CVPR 2018), by which Psomas thesis
Table 3.8 reports mAP: per query, the database images are "easy", "hard" or "junk" positives
(everything else negative), and each of the three protocols counts some as positives and removes
others from the ranking before the trapezoidal AP
(:func:`gspdml.evaluation.ranked_ap.average_precision_ranked`):

=========  ===================  =======================
protocol   positives            removed from the ranking
=========  ===================  =======================
easy       easy                 junk, hard
medium     easy, hard           junk
hard       hard                 junk, easy
=========  ===================  =======================

The mAP is the mean AP over the queries with at least one positive.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from gspdml.errors import ConfigError
from gspdml.evaluation.ranked_ap import average_precision_ranked

#: protocol -> (the labels counted as positives, the labels removed from the ranking)
PROTOCOLS = {
    "easy": (("easy",), ("junk", "hard")),
    "medium": (("easy", "hard"), ("junk",)),
    "hard": (("hard",), ("junk", "easy")),
}
#: per query, the database indices of each label
GroundTruth = Sequence[Mapping[str, Sequence[int]]]


def _marks(ground_truth: GroundTruth, labels: Sequence[str], size: int) -> torch.Tensor:
    """``[Q, size]`` bool: the database images of ``labels`` for each query."""
    marks = torch.zeros(len(ground_truth), size, dtype=torch.bool)
    for q, query in enumerate(ground_truth):
        for label in labels:
            indices = torch.as_tensor(list(query.get(label, ())), dtype=torch.long)
            if indices.numel() and (indices.min() < 0 or indices.max() >= size):
                raise ConfigError(
                    "ground truth", f"query {q}: {label} index outside the {size} database images"
                )
            marks[q, indices] = True
    return marks


def revisited_average_precision(
    scores: torch.Tensor, ground_truth: GroundTruth, protocol: str
) -> torch.Tensor:
    """AP of every query ``[Q]`` (float64; NaN for a query without positives) from ``scores
    [Q, N]`` (higher = more similar; ties keep database order) under ``protocol``."""
    if protocol not in PROTOCOLS:
        raise ConfigError(
            "protocol", f"unknown protocol {protocol!r}; choose one of {list(PROTOCOLS)}"
        )
    scores = torch.as_tensor(scores)
    if scores.ndim != 2 or scores.shape[0] != len(ground_truth):
        raise ConfigError(
            "scores",
            f"expected [queries, database] for {len(ground_truth)} queries, got {tuple(scores.shape)}",
        )
    positive_labels, removed_labels = PROTOCOLS[protocol]
    positive = _marks(ground_truth, positive_labels, scores.shape[1])
    removed = _marks(ground_truth, removed_labels, scores.shape[1]) & ~positive
    order = torch.sort(-scores, dim=1, stable=True).indices
    ranked_positive = torch.gather(positive, 1, order)
    ranked_removed = torch.gather(removed, 1, order)
    # the kept images first, in ranked order (a stable sort on the removal flag); the removed
    # ones go last as non-positives, where they move no positive's rank
    keep_first = torch.sort(ranked_removed.to(torch.int8), dim=1, stable=True).indices
    ranked = torch.gather(ranked_positive & ~ranked_removed, 1, keep_first)
    ap = average_precision_ranked(ranked, "trapezoid")
    return torch.where(positive.any(dim=1), ap, torch.full_like(ap, float("nan")))


def revisited_map(scores: torch.Tensor, ground_truth: GroundTruth, protocol: str) -> float:
    """The mAP of ``protocol`` (module doc): the mean AP over the queries with positives."""
    ap = revisited_average_precision(scores, ground_truth, protocol)
    counted = ap[~torch.isnan(ap)]
    if not counted.numel():
        raise ConfigError("ground truth", f"no query has a positive under protocol {protocol}")
    return float(counted.mean())

"""Paired comparisons of two methods trained on the same units (the (fold, seed) models of a
protocol): the mean paired difference with its confidence interval, the paired t-test and the
Wilcoxon signed-rank test (``gspdml compare``, :mod:`gspdml.workflows.compare`).

With differences d_i = b_i - a_i, i = 1..n (method b minus method a on unit i):

- paired t-test (Student 1908): mean d̄, sample std s (ddof 1), standard error s / sqrt(n),
  t = d̄ / (s / sqrt(n)) with n - 1 degrees of freedom; the 95% confidence interval of the mean
  difference is d̄ ± t_{0.975, n-1} s / sqrt(n); the two-sided p-value 2 P(T_{n-1} >= |t|).
- Wilcoxon signed-rank test (Wilcoxon 1945): zero differences are dropped (Wilcoxon's own
  rule); the remaining |d_i| are ranked (ties share their average rank); W+ is the sum of the
  ranks of the positive d_i. Without ties, the two-sided p-value is exact,
  2 min(P(W <= W+), P(W >= W+)) under the null distribution of W+ (every sign pattern equally
  likely), counted by dynamic programming over the ranks 1..m, for up to 50 pairs. With ties or
  zeros it is the same count over the 2^m sign patterns of the actual ranks while there are at
  most 13 pairs; otherwise the normal approximation with the tie correction (mean m(m+1)/4, variance (m(m+1)(2m+1) - sum(t^3 - t)/2)
  / 24, no continuity correction). These are the rules of ``scipy.stats.wilcoxon``'s default
  method, which the tests check against.

The exact two-sided p-value of m non-zero differences is at least 2 / 2^m, so the signed-rank
test can only reject at the 5% level from m = 6 on (:data:`WILCOXON_MIN_PAIRS`); below that it is
not reported.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np

from gspdml.errors import ConfigError

#: the fewest non-zero paired differences whose exact two-sided p-value can fall below 0.05
WILCOXON_MIN_PAIRS = 6
#: up to this many pairs with ties or zeros, the p-value counts every sign pattern
EXACT_WITH_TIES = 13
#: up to this many pairs without ties or zeros, the exact null distribution is counted
EXACT_WITHOUT_TIES = 50


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ConfigError("pairs", f"need two equally long lists, got {x.shape} and {y.shape}")
    difference: np.ndarray = y - x
    return difference


def paired_t(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """The paired t-test of ``b - a``: ``{"n", "mean", "std", "ci_low", "ci_high", "t", "df",
    "p"}`` (see the module doc). Needs n >= 2; with every difference equal (std 0) ``t`` and
    ``p`` are None."""
    from scipy import stats  # ~1 s to import: only when a comparison is tested

    d = _differences(a, b)
    n = d.size
    if n < 2:
        raise ConfigError("pairs", f"a paired t-test needs at least 2 pairs, got {n}")
    mean, std = float(d.mean()), float(d.std(ddof=1))
    se = std / math.sqrt(n)
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * se
    t = mean / se if se > 0 else None
    p = None if t is None else float(2 * stats.t.sf(abs(t), n - 1))
    return {
        "n": n,
        "mean": mean,
        "std": std,
        "confidence": confidence,
        "ci_low": mean - half,
        "ci_high": mean + half,
        "t": t,
        "df": n - 1,
        "p": p,
    }


def _exact_counts(m: int) -> np.ndarray:
    """counts[w] = how many of the 2^m sign patterns of the ranks 1..m give W+ = w."""
    counts = np.zeros(m * (m + 1) // 2 + 1)
    counts[0] = 1.0
    for rank in range(1, m + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return counts


def wilcoxon_signed_rank(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """The Wilcoxon signed-rank test of ``b - a``: ``{"n_nonzero", "w_plus", "statistic",
    "p", "method"}``; ``statistic`` = min(W+, W-) as scipy reports it, ``method`` "exact",
    "exact (ties or zeros: every sign pattern)" or "normal approximation". With fewer than
    :data:`WILCOXON_MIN_PAIRS` non-zero differences ``p`` is None and ``method`` says why."""
    from scipy import stats

    d = _differences(a, b)
    n, d = d.size, d[d != 0]
    m = d.size
    if m < WILCOXON_MIN_PAIRS:
        return {
            "n_nonzero": m,
            "w_plus": None,
            "statistic": None,
            "p": None,
            "method": f"not reported: {m} non-zero pairs (< {WILCOXON_MIN_PAIRS})",
        }
    ranks = stats.rankdata(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    w_minus = float(ranks[d < 0].sum())
    exact = len(np.unique(ranks)) == m and m == n
    p: float
    if exact and n <= EXACT_WITHOUT_TIES:
        counts = _exact_counts(m)
        total = counts.sum()
        below = counts[: int(round(w_plus)) + 1].sum() / total
        above = counts[int(round(w_plus)) :].sum() / total
        p, method = min(1.0, 2 * min(below, above)), "exact"
    elif n <= EXACT_WITH_TIES:
        signs = np.array(list(itertools.product((0.0, 1.0), repeat=m)))
        totals = signs @ ranks
        tolerance = 1e-9 * max(abs(w_plus), 1.0)
        below = float(np.mean(totals <= w_plus + tolerance))
        above = float(np.mean(totals >= w_plus - tolerance))
        p, method = min(1.0, 2 * min(below, above)), "exact (ties or zeros: every sign pattern)"
    else:
        _, tie_sizes = np.unique(ranks, return_counts=True)
        mean = m * (m + 1) / 4
        variance = (m * (m + 1) * (2 * m + 1) - np.sum(tie_sizes**3 - tie_sizes) / 2) / 24
        z = (w_plus - mean) / math.sqrt(variance)
        p, method = float(2 * stats.norm.sf(abs(z))), "normal approximation"
    return {
        "n_nonzero": m,
        "w_plus": w_plus,
        "statistic": min(w_plus, w_minus),
        "p": float(p),
        "method": method,
    }


def paired_comparison(
    a: Sequence[float], b: Sequence[float], confidence: float = 0.95
) -> dict[str, Any]:
    """Both tests of ``b - a``: ``{"t_test": paired_t(...), "wilcoxon": wilcoxon_signed_rank(...)}``."""
    return {"t_test": paired_t(a, b, confidence), "wilcoxon": wilcoxon_signed_rank(a, b)}


def format_p(p: Optional[float]) -> str:
    """A p-value as a table shows it: 3 significant digits, "< 0.001" below that, "–" for none."""
    if p is None:
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3g}"

"""The paired tests of ``gspdml compare`` against scipy on known inputs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from gspdml.errors import ConfigError
from gspdml.evaluation.paired_tests import (
    WILCOXON_MIN_PAIRS,
    format_p,
    paired_comparison,
    paired_t,
    wilcoxon_signed_rank,
)

# the example shape: 8 (fold, seed) models per method
GAP = [0.2912, 0.3488, 0.3350, 0.2761, 0.3633, 0.3120, 0.3015, 0.3265]
GSP = [0.3390, 0.3321, 0.3617, 0.2935, 0.3450, 0.3502, 0.2870, 0.3355]


def test_paired_t_matches_scipy_ttest_rel_and_its_confidence_interval():
    out = paired_t(GAP, GSP)
    ref = stats.ttest_rel(GSP, GAP)
    assert out["t"] == pytest.approx(ref.statistic, rel=1e-12)
    assert out["p"] == pytest.approx(ref.pvalue, rel=1e-10)
    low, high = ref.confidence_interval(0.95)
    assert (out["ci_low"], out["ci_high"]) == pytest.approx((low, high), rel=1e-10)
    assert out["n"] == 8 and out["df"] == 7
    assert out["mean"] == pytest.approx(np.mean(np.subtract(GSP, GAP)))


def test_paired_t_with_equal_differences_has_no_p_and_one_pair_is_refused():
    out = paired_t([1.0, 2.0, 3.0], [1.5, 2.5, 3.5])
    assert out["t"] is None and out["p"] is None
    assert out["ci_low"] == pytest.approx(0.5) and out["ci_high"] == pytest.approx(0.5)
    with pytest.raises(ConfigError, match="at least 2 pairs"):
        paired_t([1.0], [2.0])


@pytest.mark.parametrize(
    "a, b",
    [
        (GAP, GSP),  # 8 pairs, no ties: exact distribution
        (np.arange(20.0), np.arange(20.0) + np.linspace(-1.3, 2.9, 20) ** 3),  # 20, exact
        ([1, 2, 3, 4, 5, 6, 7, 8], [2, 3, 4, 5, 7, 5, 9, 10]),  # ties, 8 pairs: every pattern
        ([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 3, 5, 2, 8, 7, 6, 9, 13]),  # zeros and ties
        (np.zeros(30), np.round(np.linspace(-2, 5, 30))),  # ties and zeros, 30: normal approx.
        (np.zeros(60), np.linspace(-1, 3, 60) + 0.01),  # 60 pairs: normal approximation
    ],
)
def test_wilcoxon_matches_scipy_default_method(a, b):
    out = wilcoxon_signed_rank(a, b)
    ref = stats.wilcoxon(np.asarray(b, float), np.asarray(a, float))
    assert out["statistic"] == pytest.approx(ref.statistic)
    assert out["p"] == pytest.approx(ref.pvalue, rel=1e-9)


def test_wilcoxon_is_not_reported_below_six_pairs_where_it_cannot_reach_five_percent():
    # five pairs all in one direction: the smallest exact two-sided p is 2 / 2^5 = 0.0625
    assert stats.wilcoxon([1, 2, 3, 4, 5]).pvalue == pytest.approx(0.0625)
    out = wilcoxon_signed_rank(np.zeros(5), [1, 2, 3, 4, 5])
    assert out["p"] is None and "5 non-zero pairs" in out["method"]
    six = wilcoxon_signed_rank(np.zeros(WILCOXON_MIN_PAIRS), np.arange(1.0, 7.0))
    assert six["p"] == pytest.approx(2 / 2**6) and six["method"] == "exact"


def test_paired_comparison_holds_both_tests_and_p_values_print_readably():
    out = paired_comparison(GAP, GSP)
    assert set(out) == {"t_test", "wilcoxon"}
    assert format_p(None) == "–" and format_p(0.0004) == "< 0.001" and format_p(0.3123) == "0.312"

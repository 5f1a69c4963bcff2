"""Tests of recoe_causaldiag.statistics against hand-computed values."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from recoe_causaldiag.statistics import (
    Estimate,
    PairedTest,
    bootstrap_ci,
    copeland,
    diagnosticity,
    diagnosticity_from_d,
    edit_reliability,
    mcnemar_paired,
    pairwise_d,
    ttest_against_half,
    wilcoxon_paired,
)

pytestmark = pytest.mark.filterwarnings("error")

NAN = float("nan")


def test_pairwise_d_hand_example():
    d = pairwise_d([3, 1, 2, NAN], np.array([1, 1, 5, 0]))
    np.testing.assert_array_equal(d, [1.0, 0.5, 0.0, NAN])
    assert d.dtype == float


def test_pairwise_d_length_mismatch_names_argument():
    with pytest.raises(ValueError, match="score_unfaithful"):
        pairwise_d([1, 2, 3], [1, 2])


def test_diagnosticity_hand_example_excludes_and_counts_nan():
    est = diagnosticity([3, 1, 2, NAN], [1, 1, 5, 0])
    assert est.value == 0.5
    assert (est.n, est.n_valid, est.n_nan) == (4, 3, 1)
    # d = [1, 0.5, 0] has mean exactly 0.5, so t = 0 and the two-sided p is 1.
    assert est.p_value == pytest.approx(1.0)
    assert 0.0 <= est.ci_low <= 0.5 <= est.ci_high <= 1.0


def test_nan_is_not_a_loss():
    est = diagnosticity([2, 2, NAN, NAN], [1, 1, 0, 0])
    assert est.value == 1.0
    assert est.n_nan == 2


def test_ttest_against_half_by_hand():
    d = np.array([1.0, 1.0, 1.0, 0.5, 0.0])
    # mean 0.7; squared deviations 0.09*3 + 0.04 + 0.49 = 0.8; s^2 = 0.8/4 = 0.2;
    # standard error sqrt(0.2/5) = 0.2; t = (0.7 - 0.5)/0.2 = 1.0 with 4 df.
    expected = 2 * stats.t.sf(1.0, df=4)
    assert ttest_against_half(d) == pytest.approx(expected, rel=1e-12)
    # Closed form for 4 df: F(1) = 1/2 + 3/8 * (1/sqrt(1.25)) * (1 - 0.8/12).
    closed = 2 * (0.5 - 0.375 / math.sqrt(1.25) * (1 - 0.8 / 12))
    assert ttest_against_half(d) == pytest.approx(closed, rel=1e-12)


def test_ttest_zero_variance_takes_the_limit_and_one_value_is_nan():
    assert ttest_against_half([1.0, 1.0, 1.0]) == 0.0 and ttest_against_half([0.0, 0.0]) == 0.0
    assert ttest_against_half([0.5, 0.5]) == 1.0
    assert math.isnan(ttest_against_half([1.0]))


def test_bootstrap_ci_contains_mean_bounded_and_reproducible():
    d = np.array([1, 1, 0, 0.5, 1, 1, 0, 1, 0.5, 1, 1, 0])
    low, high = bootstrap_ci(d, seed=7)
    assert 0.0 <= low < d.mean() < high <= 1.0
    assert bootstrap_ci(d, seed=7) == (low, high)
    assert diagnosticity_from_d(d, seed=7) == diagnosticity_from_d(d, seed=7)


def test_bootstrap_ci_rejects_too_few_resamples():
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci([0.0, 1.0], n_resamples=1999)
    with pytest.raises(ValueError, match="n_resamples"):
        diagnosticity([1, 0], [0, 1], n_resamples=100)


def test_no_valid_pairs():
    est = diagnosticity([NAN, 1.0], [0.0, NAN])
    assert all(math.isnan(x) for x in (est.value, est.ci_low, est.ci_high, est.p_value))
    assert (est.n, est.n_valid, est.n_nan) == (2, 0, 2)
    assert all(math.isnan(x) for x in bootstrap_ci([]))


def test_single_valid_pair_collapses_ci():
    est = diagnosticity([2.0, NAN], [1.0, 0.0])
    assert (est.value, est.ci_low, est.ci_high) == (1.0, 1.0, 1.0)
    assert math.isnan(est.p_value)
    assert (est.n_valid, est.n_nan) == (1, 1)


def test_identical_d_collapses_ci():
    est = diagnosticity_from_d([0.5] * 6)
    assert (est.value, est.ci_low, est.ci_high) == (0.5, 0.5, 0.5)
    assert est.p_value == 1.0
    assert bootstrap_ci([0.0, 0.0, 0.0]) == (0.0, 0.0)


def test_estimate_is_frozen():
    est = diagnosticity_from_d([1.0, 0.0])
    assert isinstance(est, Estimate)
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.value = 0.0


def test_wilcoxon_dominance_exact_p():
    d_a = np.arange(1, 11) / 10  # ten positive differences of distinct sizes
    result = wilcoxon_paired(d_a, np.zeros(10))
    # Exact null: each of the 2^10 sign patterns is equally likely; only the
    # all-positive and all-negative patterns are as extreme -> p = 2/1024.
    assert result.p_value == pytest.approx(2 / 1024)
    assert result.statistic == 0.0
    assert result.n == 10


def test_wilcoxon_all_zero_differences_and_nan_dropping():
    result = wilcoxon_paired([1.0, 0.5, NAN, 0.0], [1.0, 0.5, 1.0, 0.0])
    assert result == PairedTest(statistic=0.0, p_value=1.0, n=3)
    empty = wilcoxon_paired([NAN], [1.0])
    assert empty.n == 0 and math.isnan(empty.p_value)
    with pytest.raises(ValueError, match="d_b"):
        wilcoxon_paired([1.0, 0.0], [1.0])


def test_mcnemar_all_discordant_for_a():
    d_a = [1.0] * 8 + [1.0, 0.0, 0.5]
    d_b = [0.0] * 6 + [0.5] * 2 + [1.0, 0.0, 0.0]
    result = mcnemar_paired(d_a, d_b)
    assert result.statistic == 8.0
    assert result.p_value == pytest.approx(2 * 0.5**8)
    assert result.n == 11


def test_mcnemar_split_discordant_and_none():
    # 6 discordant for a, 2 for b: p = 2 * (C(8,0)+C(8,1)+C(8,2)) / 2^8 = 74/256.
    d_a = [1.0] * 6 + [0.0] * 2 + [NAN]
    d_b = [0.0] * 6 + [1.0] * 2 + [1.0]
    result = mcnemar_paired(d_a, d_b)
    assert (result.statistic, result.n) == (6.0, 8)
    assert result.p_value == pytest.approx(74 / 256)
    assert mcnemar_paired([1.0, 0.0], [1.0, 0.5]).p_value == 1.0


def test_copeland_two_configs_three_metrics():
    configurations = {
        # A beats C beats B, every difference one-signed on all 10 pairs.
        "task1/model1": {"A": [1.0] * 10, "B": [0.0] * 10, "C": [0.5] * 10},
        # A vs B: +1/-1 alternating (W+ = W-, p = 1) -> tie; both beat D on
        # ten one-signed differences; C is absent here.
        "task1/model2": {"A": [1.0, 0.0] * 10, "B": [0.0, 1.0] * 10, "D": [0.0] * 20},
    }
    assert copeland(configurations) == {"A": 3.5, "B": 1.5, "C": 1.0, "D": 0.0}


def test_copeland_nothing_significant_splits_points():
    configurations = {"c": {"A": [1.0, 0.0, 1.0], "B": [0.0, 1.0, 0.0], "C": [0.5, 0.5, 0.5]}}
    assert copeland(configurations) == {"A": 1.0, "B": 1.0, "C": 1.0}


def test_edit_reliability_lower_perplexity_is_success():
    # faithful lower: yes, no, tie (counts 0), NaN (excluded), yes -> [1, 0, 0, 1]
    est = edit_reliability([10.0, 20.0, 5.0, NAN, 7.0], [12.0, 15.0, 5.0, 3.0, 9.0])
    assert est.value == 0.5
    assert (est.n, est.n_valid, est.n_nan) == (5, 4, 1)
    assert est.p_value == pytest.approx(1.0)
    assert 0.0 <= est.ci_low <= 0.5 <= est.ci_high <= 1.0


def test_edit_reliability_all_lower_and_length_check():
    est = edit_reliability(np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 4.0]))
    assert (est.value, est.ci_low, est.ci_high) == (1.0, 1.0, 1.0)
    assert est.p_value == 0.0
    with pytest.raises(ValueError, match="ppl_unfaithful"):
        edit_reliability([1.0], [1.0, 2.0])

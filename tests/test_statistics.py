"""Tests of recoe_causaldiag.statistics against hand-computed values."""

import dataclasses
import math

import numpy as np
import pytest
from scipy import stats

from recoe_causaldiag.statistics import (
    ABOVE,
    BELOW,
    MIN_N_VALID,
    Estimate,
    PairedTest,
    bootstrap_ci,
    copeland,
    coverage_aware_d,
    diagnosticity,
    diagnosticity_from_d,
    direction_marker,
    edit_reliability,
    holm,
    mcnemar_paired,
    pairwise_d,
    score_interval,
    sign_test,
    ttest_against_half,
    wilcoxon_paired,
)

pytestmark = pytest.mark.filterwarnings("error")

NAN = float("nan")
Z95 = stats.norm.ppf(0.975)


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
    assert (est.coverage, est.coverage_aware) == (0.75, 0.5)
    # d = [1, 0.5, 0]: one win, one loss, the odd tie dropped -> 1 of 2, p = 1; the mean is exactly 0.5, so t = 0.
    assert est.p_value == 1.0 and est.p_ttest == pytest.approx(1.0)
    assert 0.0 <= est.ci_low <= 0.5 <= est.ci_high <= 1.0


def test_nan_is_not_a_loss_but_coverage_shows_it():
    est = diagnosticity([2, 2, NAN, NAN], [1, 1, 0, 0])
    assert est.value == 1.0
    assert est.n_nan == 2
    # coverage-aware D counts the two declined pairs as ties: (1 + 1 + 0.5 + 0.5) / 4
    assert (est.coverage, est.coverage_aware) == (0.5, 0.75)
    np.testing.assert_array_equal(coverage_aware_d([1.0, NAN, 0.0]), [1.0, 0.5, 0.0])


def test_ttest_against_half_by_hand():
    d = np.array([1.0, 1.0, 1.0, 0.5, 0.0])
    # mean 0.7; squared deviations 0.09*3 + 0.04 + 0.49 = 0.8; s^2 = 0.8/4 = 0.2;
    # standard error sqrt(0.2/5) = 0.2; t = (0.7 - 0.5)/0.2 = 1.0 with 4 df.
    expected = 2 * stats.t.sf(1.0, df=4)
    assert ttest_against_half(d) == pytest.approx(expected, rel=1e-12)
    # Closed form for 4 df: F(1) = 1/2 + 3/8 * (1/sqrt(1.25)) * (1 - 0.8/12).
    closed = 2 * (0.5 - 0.375 / math.sqrt(1.25) * (1 - 0.8 / 12))
    assert ttest_against_half(d) == pytest.approx(closed, rel=1e-12)


def test_ttest_zero_variance_is_undefined_not_certain_and_one_value_is_nan():
    assert math.isnan(ttest_against_half([1.0, 1.0, 1.0])) and math.isnan(ttest_against_half([0.0, 0.0]))
    assert ttest_against_half([0.5, 0.5]) == 1.0
    assert math.isnan(ttest_against_half([1.0]))


def test_two_wins_of_two_is_not_significant_and_its_ci_is_not_a_point():
    est = diagnosticity_from_d([1.0, 1.0])
    # exact sign test: both of 2 -> p = 2 * 0.5**2 = 0.5 (the t-test used to give p = 0 here)
    assert est.p_value == 0.5 and math.isnan(est.p_ttest)
    # Wilson at 2 of 2: lower bound n / (n + z^2)
    assert est.ci_high == 1.0 and est.ci_low == pytest.approx(2 / (2 + Z95**2))
    assert direction_marker(est.value, est.p_value) == ""
    tied = diagnosticity_from_d([0.5, 0.5])
    assert tied.p_value == 1.0 and tied.ci_low < 0.5 < tied.ci_high


def test_sign_test_splits_ties_half_half_by_hand():
    # 8 wins, 4 ties -> 2 wins + 2 losses from the ties: 10 of 12, p = 2 * (1 + 12 + 66) / 4096
    assert sign_test([1.0] * 8 + [0.5] * 4) == pytest.approx(2 * 79 / 4096)
    # an odd tie left over is dropped: 3 of 3
    assert sign_test([1.0, 1.0, 1.0, 0.5]) == pytest.approx(0.25)
    assert sign_test([0.5] * 5) == 1.0 and math.isnan(sign_test([NAN]))
    # the classical test drops ties: far more power for a metric that ties often (2 wins, 18 losses, 180 ties)
    tie_heavy = [1.0] * 2 + [0.0] * 18 + [0.5] * 180
    assert sign_test(tie_heavy, ties="drop") == pytest.approx(stats.binomtest(2, 20).pvalue)
    assert sign_test(tie_heavy) == pytest.approx(stats.binomtest(92, 200).pvalue)
    assert sign_test(tie_heavy, ties="drop") < 0.001 and sign_test(tie_heavy) > 0.2
    with pytest.raises(ValueError, match="ties must be"):
        sign_test(tie_heavy, ties="half")
    # d of both directions (0.25, 0.75) are tested on their side of 0.5
    assert sign_test([0.75, 0.75, 0.25, 1.0, 0.5, NAN]) == sign_test([1.0, 1.0, 0.0, 1.0, 0.5])


def test_sign_test_by_cluster_counts_each_cluster_once():
    d = [1.0] * 9 + [0.0]
    clusters = ["a"] * 5 + ["b"] * 4 + ["c"]
    # cluster means: a 1.0, b 1.0, c 0.0 -> 2 wins of 3
    assert sign_test(d, clusters) == pytest.approx(1.0)
    assert sign_test(d) == pytest.approx(2 * (1 + 10) / 1024)
    # a pair without a cluster is its own unit
    assert sign_test(d, ["a"] * 9 + [None]) == sign_test([1.0, 0.0])
    with pytest.raises(ValueError, match="clusters has length 2"):
        sign_test(d, ["a", "b"])


def wilson(successes: int, n: int) -> tuple[float, float]:
    """Wilson's score interval of a proportion, by its textbook formula."""
    p, z2 = successes / n, Z95**2
    center, half = (p + z2 / (2 * n)) / (1 + z2 / n), Z95 / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return center - half, center + half


def test_score_interval_is_wilsons_for_wins_and_losses_and_narrower_with_ties():
    assert score_interval([0.0] * 10) == pytest.approx((0.0, Z95**2 / (10 + Z95**2)))
    assert score_interval([1.0] * 30 + [0.0] * 10 + [NAN]) == pytest.approx(wilson(30, 40))
    assert score_interval([1.0, 0.0] * 50) == pytest.approx(wilson(50, 100))
    # ties add no spread: m = (8 * 1/4 + z^2 / 4) / (12 + z^2); D - 1/2 = the roots x of (x_hat - x)^2 = k (m - x^2)
    d = [1.0] * 8 + [0.5] * 4
    k, m, x = Z95**2 / 12, (8 / 4 + Z95**2 / 4) / (12 + Z95**2), 0.5 * 8 / 12
    root = math.sqrt(k * (m * (1 + k) - x * x))
    assert score_interval(d) == pytest.approx((0.5 + (x - root) / (1 + k), 0.5 + (x + root) / (1 + k)))
    tied, untied = score_interval([0.5] * 200), score_interval([1.0, 0.0] * 100)
    assert 0.49 < tied[0] < 0.5 < tied[1] < 0.51 and untied[1] - untied[0] > 5 * (tied[1] - tied[0])
    assert all(math.isnan(x) for x in score_interval([NAN]))


def test_ci_is_never_a_point_and_covers_the_bootstrap():
    for d in ([1.0] * 100, [0.0] * 7, [0.5] * 6, [1.0]):
        est = diagnosticity_from_d(d)
        assert est.ci_high - est.ci_low > 0.0 and 0.0 <= est.ci_low <= est.value <= est.ci_high <= 1.0
    d = np.array([1.0] * 30 + [0.0] * 10)
    est = diagnosticity_from_d(d)
    low, high = bootstrap_ci(d)
    score = score_interval(d)
    assert (est.ci_low, est.ci_high) == (min(low, score[0]), max(high, score[1]))


def test_cluster_bootstrap_is_wider_than_the_same_pairs_as_independent():
    # 12 clusters of 10 pairs that agree within their cluster: 8 clusters win, 4 lose
    d = np.repeat([1.0] * 8 + [0.0] * 4, 10)
    clusters = np.repeat(np.arange(12), 10).tolist()
    independent = diagnosticity_from_d(d, seed=3)
    clustered = diagnosticity_from_d(d, clusters=clusters, seed=3)
    assert clustered.value == independent.value
    assert clustered.ci_high - clustered.ci_low > 1.5 * (independent.ci_high - independent.ci_low)
    assert clustered.p_value == pytest.approx(stats.binomtest(8, 12).pvalue)
    assert independent.p_value < 0.001 < clustered.p_value
    low, high = bootstrap_ci(d, clusters=clusters, seed=3)
    assert (low, high) == bootstrap_ci(d, clusters=clusters, seed=3) and high - low > 0.3
    assert bootstrap_ci([1.0, 0.0], clusters=["a", "a"]) == (0.5, 0.5), "one cluster: resampling cannot vary"


def test_holm_by_hand():
    # m = 4 tests: 0.01 * 4 = 0.04; 0.03 * 3 = 0.09; 0.04 * 2 = 0.08 -> 0.09 (monotone); 0.5 * 1
    np.testing.assert_allclose(holm([0.01, 0.04, NAN, 0.03, 0.5]), [0.04, 0.09, NAN, 0.09, 0.5])
    np.testing.assert_array_equal(holm([0.9, 0.6]), [1.0, 1.0])
    assert holm([]).size == 0


def test_direction_markers_follow_the_sign_of_d_minus_half():
    assert direction_marker(0.58, 0.01) == ABOVE and direction_marker(0.46, 0.01) == BELOW
    assert direction_marker(0.58, 0.05) == "" and direction_marker(0.46, 0.2) == ""
    assert direction_marker(None, 0.01) == "" and direction_marker(0.9, None) == "" and direction_marker(0.9, NAN) == ""


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
    assert all(math.isnan(x) for x in (est.value, est.ci_low, est.ci_high, est.p_value, est.p_ttest))
    assert (est.n, est.n_valid, est.n_nan, est.coverage) == (2, 0, 2, 0.0) and math.isnan(est.coverage_aware)
    assert not est.rankable
    assert all(math.isnan(x) for x in bootstrap_ci([]))


def test_single_valid_pair():
    est = diagnosticity([2.0, NAN], [1.0, 0.0])
    assert (est.value, est.ci_high) == (1.0, 1.0) and est.ci_low == pytest.approx(1 / (1 + Z95**2))
    assert est.p_value == 1.0 and math.isnan(est.p_ttest)
    assert (est.n_valid, est.n_nan) == (1, 1)


def test_identical_d_collapses_the_bootstrap_but_not_the_ci():
    est = diagnosticity_from_d([0.5] * 6)
    assert est.value == 0.5 and est.ci_low < 0.5 < est.ci_high
    assert est.p_value == 1.0 and est.p_ttest == 1.0
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
    assert copeland(configurations, min_n_valid=1) == {"A": 3.5, "B": 1.5, "C": 1.0, "D": 0.0}


def test_copeland_nothing_significant_splits_points():
    configurations = {"c": {"A": [1.0, 0.0, 1.0], "B": [0.0, 1.0, 0.0], "C": [0.5, 0.5, 0.5]}}
    assert copeland(configurations, min_n_valid=1) == {"A": 1.0, "B": 1.0, "C": 1.0}


def test_nan_selection_artifact_is_caught_by_coverage_aware_d_and_copeland():
    # `selective` is a metric at D = 0.60 on 100 pairs that declines (NaN) exactly the 40 pairs it would lose;
    # `honest` scores every pair and wins 85, 15 of its losses on pairs `selective` wins.
    selective = np.array([1.0] * 60 + [NAN] * 40)
    honest = np.array([1.0] * 45 + [0.0] * 15 + [1.0] * 40)
    gamed, fair = diagnosticity_from_d(selective), diagnosticity_from_d(honest)
    assert gamed.value == 1.0 > fair.value == 0.85, "among valid pairs the artifact looks perfect"
    # counted as ties, the declined pairs give what the metric would get by answering a tie there: 0.8, not 1.0
    assert gamed.coverage == 0.6 and gamed.coverage_aware == pytest.approx(0.8)
    assert gamed.coverage_aware < fair.coverage_aware
    # on the pairs valid for both (the old rule) the artifact won the comparison outright
    both = ~np.isnan(selective)
    assert wilcoxon_paired(selective[both], honest[both]).p_value < 0.05
    assert copeland({"c": {"selective": selective, "honest": honest}}) == {"selective": 0.5, "honest": 0.5}


def test_all_nan_metric_is_absent_from_copeland_not_half_a_winner():
    rng = np.random.default_rng(0)
    chance = rng.choice([0.0, 1.0], size=60)
    board = {"task": {"good": np.ones(60), "chance": chance, "never": np.full(60, NAN)}}
    scores = copeland(board)
    # under the old rule `never` took 0.5 from each comparison (1.0) and beat `chance` (0.5): now it is absent
    assert "never" not in scores and scores == {"good": 1.0, "chance": 0.0}
    few = {"task": {"good": np.ones(60), "thin": np.r_[np.ones(MIN_N_VALID - 1), np.full(41, NAN)]}}
    assert copeland(few) == {"good": 0.0}, "a metric with fewer valid pairs than the minimum is left out"
    with pytest.raises(ValueError, match="min_n_valid"):
        copeland(board, min_n_valid=0)


def test_edit_reliability_lower_perplexity_is_success():
    # faithful lower: yes, no, tie (counts 0), NaN (excluded), yes -> [1, 0, 0, 1]
    est = edit_reliability([10.0, 20.0, 5.0, NAN, 7.0], [12.0, 15.0, 5.0, 3.0, 9.0])
    assert est.value == 0.5
    assert (est.n, est.n_valid, est.n_nan) == (5, 4, 1)
    assert est.p_value == pytest.approx(1.0) and est.p_ttest == pytest.approx(1.0)
    assert 0.0 <= est.ci_low <= 0.5 <= est.ci_high <= 1.0


def test_edit_reliability_all_lower_and_length_check():
    est = edit_reliability(np.array([1.0, 2.0, 3.0]), np.array([2.0, 3.0, 4.0]))
    assert (est.value, est.ci_high) == (1.0, 1.0) and est.ci_low == pytest.approx(3 / (3 + Z95**2))
    assert est.p_value == 0.25 and math.isnan(est.p_ttest)
    with pytest.raises(ValueError, match="ppl_unfaithful"):
        edit_reliability([1.0], [1.0, 2.0])

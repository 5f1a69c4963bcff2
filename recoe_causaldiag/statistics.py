"""Statistics for causal diagnosticity (eq. 4-6 and section 5.3 of the paper).

A faithfulness metric scores the faithful and the unfaithful explanation of
each pair; the pairwise outcome ``d`` is 1 when the faithful one scores
higher, 0.5 on a tie and 0 otherwise.  Diagnosticity is the mean of ``d``
over the pairs the metric could score (NaN scores are excluded and counted,
never treated as losses).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

MIN_RESAMPLES = 2000


@dataclass(frozen=True)
class Estimate:
    """A proportion-like mean with its uncertainty.

    ``value`` is the mean over valid pairs, ``(ci_low, ci_high)`` its
    percentile-bootstrap confidence interval, ``p_value`` the two-sided
    one-sample t-test against 0.5 (chance).  ``n`` counts all pairs,
    ``n_valid`` those that entered the mean and ``n_nan`` those excluded.
    """

    value: float
    ci_low: float
    ci_high: float
    p_value: float
    n: int
    n_valid: int
    n_nan: int


@dataclass(frozen=True)
class PairedTest:
    """Result of a paired test between two metrics on the same pairs.

    ``n`` is the number of pairs valid for both metrics.
    """

    statistic: float
    p_value: float
    n: int


def _as_1d(values: ArrayLike, name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


def _paired(a: ArrayLike, b: ArrayLike, name_a: str, name_b: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = _as_1d(a, name_a), _as_1d(b, name_b)
    if x.shape != y.shape:
        raise ValueError(f"{name_b} has length {len(y)} but {name_a} has length {len(x)}")
    return x, y


def pairwise_d(score_faithful: ArrayLike, score_unfaithful: ArrayLike) -> np.ndarray:
    """Pairwise outcome d: 1 if faithful > unfaithful, 0.5 if equal, 0 if less; NaN if either is NaN."""
    faithful, unfaithful = _paired(score_faithful, score_unfaithful, "score_faithful", "score_unfaithful")
    d = 0.5 * (np.sign(faithful - unfaithful) + 1.0)
    d[np.isnan(faithful) | np.isnan(unfaithful)] = np.nan
    return d


def bootstrap_ci(
    values: ArrayLike, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Seeded percentile-bootstrap CI of the mean of ``values`` (NaN entries ignored).

    Returns ``(nan, nan)`` without data and ``(mean, mean)`` when all values
    are identical (including a single value), where resampling cannot vary.
    """
    if n_resamples < MIN_RESAMPLES:
        raise ValueError(f"n_resamples must be at least {MIN_RESAMPLES}, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    array = _as_1d(values, "values")
    array = array[~np.isnan(array)]
    if array.size == 0:
        return float("nan"), float("nan")
    if np.all(array == array[0]):
        return float(array[0]), float(array[0])
    result = stats.bootstrap(
        (array,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def ttest_against_half(d: ArrayLike) -> float:
    """Two-sided p-value of a one-sample t-test of ``d`` against 0.5 (NaN entries ignored).

    NaN when fewer than two values. With zero variance the statistic is the limit of the test: p = 1 when
    every d is 0.5, p = 0 when every d is the same other value (e.g. a perfect oracle, all d = 1).
    """
    array = _as_1d(d, "d")
    array = array[~np.isnan(array)]
    if array.size < 2:
        return float("nan")
    if np.all(array == array[0]):
        return 1.0 if array[0] == 0.5 else 0.0
    return float(stats.ttest_1samp(array, 0.5).pvalue)


def diagnosticity_from_d(d: ArrayLike, *, confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0) -> Estimate:
    """Diagnosticity (mean of valid d) with bootstrap CI and t-test; NaN d are excluded and counted."""
    array = _as_1d(d, "d")
    valid = array[~np.isnan(array)]
    ci_low, ci_high = bootstrap_ci(valid, confidence=confidence, n_resamples=n_resamples, seed=seed)
    return Estimate(
        value=float(valid.mean()) if valid.size else float("nan"),
        ci_low=ci_low,
        ci_high=ci_high,
        p_value=ttest_against_half(valid),
        n=int(array.size),
        n_valid=int(valid.size),
        n_nan=int(array.size - valid.size),
    )


def diagnosticity(
    score_faithful: ArrayLike,
    score_unfaithful: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Diagnosticity of a metric from its scores on faithful and unfaithful explanations."""
    return diagnosticity_from_d(
        pairwise_d(score_faithful, score_unfaithful),
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )


def _valid_pairs(d_a: ArrayLike, d_b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a, b = _paired(d_a, d_b, "d_a", "d_b")
    keep = ~(np.isnan(a) | np.isnan(b))
    return a[keep], b[keep]


def wilcoxon_paired(d_a: ArrayLike, d_b: ArrayLike) -> PairedTest:
    """Wilcoxon signed-rank test of d_a against d_b on pairs valid for both.

    All-zero differences give statistic 0.0 and p 1.0 (no evidence of a
    difference); no valid pairs give NaN statistic and p.
    """
    a, b = _valid_pairs(d_a, d_b)
    if a.size == 0:
        return PairedTest(statistic=float("nan"), p_value=float("nan"), n=0)
    if np.all(a == b):
        return PairedTest(statistic=0.0, p_value=1.0, n=int(a.size))
    result = stats.wilcoxon(a, b)
    return PairedTest(statistic=float(result.statistic), p_value=float(result.pvalue), n=int(a.size))


def mcnemar_paired(d_a: ArrayLike, d_b: ArrayLike) -> PairedTest:
    """Exact McNemar test: a pair is a success for a metric when its d == 1.

    ``statistic`` counts discordant pairs where a succeeds and b does not;
    the p-value is the two-sided exact binomial test (p = 0.5) over all
    discordant pairs, 1.0 when there are none.
    """
    a, b = _valid_pairs(d_a, d_b)
    success_a, success_b = a == 1.0, b == 1.0
    a_only = int(np.sum(success_a & ~success_b))
    discordant = a_only + int(np.sum(success_b & ~success_a))
    p_value = 1.0 if discordant == 0 else float(stats.binomtest(a_only, discordant, 0.5).pvalue)
    return PairedTest(statistic=float(a_only), p_value=p_value, n=int(a.size))


def copeland(configurations: Mapping[str, Mapping[str, Sequence[float]]], *, alpha: float = 0.05) -> dict[str, float]:
    """Copeland score of each metric summed over (task, model) configurations.

    ``configurations`` maps a configuration name to metric name -> d array
    (same pairs within a configuration).  In each configuration every pair
    of metrics present is compared with the Wilcoxon test; if p < alpha the
    metric with the higher mean d (over pairs valid for both) gets 1 and the
    other 0, otherwise each gets 0.5.  Metrics absent from a configuration
    get nothing there.
    """
    scores: dict[str, float] = {}
    for per_metric in configurations.values():
        for name in per_metric:
            scores.setdefault(name, 0.0)
        for name_a, name_b in combinations(per_metric, 2):
            a, b = _valid_pairs(per_metric[name_a], per_metric[name_b])
            if wilcoxon_paired(a, b).p_value < alpha and a.mean() != b.mean():
                scores[name_a if a.mean() > b.mean() else name_b] += 1.0
            else:
                scores[name_a] += 0.5
                scores[name_b] += 0.5
    return scores


def edit_reliability(
    ppl_faithful: ArrayLike,
    ppl_unfaithful: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Share of pairs whose faithful explanation has strictly lower perplexity than the unfaithful one.

    Ties count as 0; pairs with a NaN perplexity are excluded and counted.
    ``p_value`` is the one-sample t-test of the indicator against 0.5.
    """
    faithful, unfaithful = _paired(ppl_faithful, ppl_unfaithful, "ppl_faithful", "ppl_unfaithful")
    indicator = (faithful < unfaithful).astype(float)
    indicator[np.isnan(faithful) | np.isnan(unfaithful)] = np.nan
    return diagnosticity_from_d(indicator, confidence=confidence, n_resamples=n_resamples, seed=seed)

"""Statistics for causal diagnosticity (eq. 4-6 and section 5.3 of the paper).

A faithfulness metric scores the faithful and the unfaithful explanation of
each pair; the pairwise outcome ``d`` is 1 when the faithful one scores
higher, 0.5 on a tie and 0 otherwise.  Diagnosticity is the mean of ``d``
over the pairs the metric could score (NaN scores are excluded and counted,
never treated as losses); its coverage is the share of pairs it could score.

Every D comes with an exact two-sided sign test against chance (ties split
half-half), a 95% CI that never collapses to a point (the hull of a seeded
percentile bootstrap, by cluster where pairs share an entity, and a Wilson
score interval), and the paper's one-sample t-test as a secondary figure.
Rankings and Copeland scores use the coverage-aware D, in which a pair the
metric declined counts as a tie, so declining to score never pays.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

MIN_RESAMPLES = 2000
ALPHA = 0.05
"""Significance level of the markers, after Holm's adjustment across the tests of one results file or board."""
MIN_N_VALID = 20
"""Rows with fewer valid pairs are left out of rankings and Copeland scores (shown, never ranked)."""
ABOVE, BELOW = "▲", "▼"
TIES = "split"
"""How the primary sign test treats ties (SPEC §7: split half-half between wins and losses)."""
_CHUNK = 500


@dataclass(frozen=True)
class Estimate:
    """A proportion-like mean with its uncertainty.

    ``value`` is the mean over valid pairs and ``(ci_low, ci_high)`` its CI
    (`diagnosticity_from_d`).  ``p_value`` is the exact two-sided sign test
    against 0.5 with ties split half-half (`sign_test`), ``p_ttest`` the
    paper's one-sample t-test against 0.5 (`ttest_against_half`).  ``n``
    counts all pairs, ``n_valid`` those that entered the mean and ``n_nan``
    those excluded; ``coverage`` is n_valid / n and ``coverage_aware`` the
    mean with every excluded pair counted as a tie (0.5), what rankings use
    (both NaN without data).
    """

    value: float
    ci_low: float
    ci_high: float
    p_value: float
    p_ttest: float
    n: int
    n_valid: int
    n_nan: int
    coverage: float = field(init=False)
    coverage_aware: float = field(init=False)

    def __post_init__(self) -> None:
        coverage = self.n_valid / self.n if self.n else math.nan
        aware = (self.value * self.n_valid + 0.5 * self.n_nan) / self.n if self.n_valid else math.nan
        object.__setattr__(self, "coverage", coverage)
        object.__setattr__(self, "coverage_aware", aware)

    @property
    def rankable(self) -> bool:
        """Whether enough pairs were scored for the row to enter rankings and Copeland scores."""
        return self.n_valid >= MIN_N_VALID


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


def _cluster_codes(clusters: Sequence[Hashable | None] | None, n: int) -> np.ndarray:
    """One integer per value naming its cluster; a value without a cluster (None, or no clusters) is its own."""
    if clusters is None:
        return np.arange(n)
    if len(clusters) != n:
        raise ValueError(f"clusters has length {len(clusters)} but the values have length {n}")
    codes: dict[tuple[bool, Hashable], int] = {}
    keys = [(False, i) if c is None else (True, c) for i, c in enumerate(clusters)]
    return np.array([codes.setdefault(key, len(codes)) for key in keys])


def _valid(values: ArrayLike, clusters: Sequence[Hashable | None] | None, name: str) -> tuple[np.ndarray, np.ndarray]:
    """The non-NaN values and their cluster codes (0..k-1, in order of first appearance)."""
    array = _as_1d(values, name)
    codes = _cluster_codes(clusters, array.size)
    keep = ~np.isnan(array)
    return array[keep], np.unique(codes[keep], return_inverse=True)[1]


def pairwise_d(score_faithful: ArrayLike, score_unfaithful: ArrayLike) -> np.ndarray:
    """Pairwise outcome d: 1 if faithful > unfaithful, 0.5 if equal, 0 if less; NaN if either is NaN."""
    faithful, unfaithful = _paired(score_faithful, score_unfaithful, "score_faithful", "score_unfaithful")
    d = 0.5 * (np.sign(faithful - unfaithful) + 1.0)
    d[np.isnan(faithful) | np.isnan(unfaithful)] = np.nan
    return d


def bootstrap_ci(
    values: ArrayLike,
    *,
    clusters: Sequence[Hashable | None] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Seeded percentile-bootstrap CI of the mean of ``values`` (NaN entries ignored).

    Where ``clusters`` names each value's cluster (pairs that share an entity), whole clusters are resampled
    with replacement and the statistic is the mean over the values they hold, so dependent pairs move
    together; values without a cluster are resampled alone. Returns ``(nan, nan)`` without data and
    ``(mean, mean)`` when resampling cannot vary (one cluster, or all values identical).
    """
    if n_resamples < MIN_RESAMPLES:
        raise ValueError(f"n_resamples must be at least {MIN_RESAMPLES}, got {n_resamples}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    array, codes = _valid(values, clusters, "values")
    if array.size == 0:
        return math.nan, math.nan
    sums, counts = np.bincount(codes, weights=array), np.bincount(codes).astype(float)
    if sums.size == 1 or np.all(array == array[0]):
        mean = float(array.mean())
        return mean, mean
    rng = np.random.default_rng(seed)
    means = np.empty(n_resamples)
    for start in range(0, n_resamples, _CHUNK):
        draw = rng.integers(0, sums.size, size=(min(_CHUNK, n_resamples - start), sums.size))
        means[start : start + len(draw)] = sums[draw].sum(axis=1) / counts[draw].sum(axis=1)
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def score_interval(d: ArrayLike, *, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of the mean of ``d`` (values in [0, 1], NaN ignored), with ties at 0.5 counted as
    such; ``(nan, nan)`` without data.

    The interval solves (D̂ - D)² = z² Var(D) / n with Var(D) = m - (D - 1/2)², where m, the mean of
    (d - 1/2)², is estimated with z² pseudo-pairs at its maximum 1/4 (as Wilson's interval adds z² pseudo
    observations). For d of 0 and 1 only, m = 1/4 and this is exactly Wilson's interval of a proportion; a tie
    adds no spread, so a metric that ties often is not given a Bernoulli-wide interval, yet not even a sample of
    ties alone collapses to a point. It stays inside [0, 1], also at 0 and 1.
    """
    array = _as_1d(d, "d")
    array = array[~np.isnan(array)]
    if array.size == 0:
        return math.nan, math.nan
    n, z2 = array.size, float(stats.norm.ppf(0.5 + confidence / 2)) ** 2
    k = z2 / n
    centred = float(array.mean()) - 0.5
    spread = (float(np.sum((array - 0.5) ** 2)) + z2 / 4) / (n + z2)
    root = math.sqrt(max(0.0, k * (spread * (1.0 + k) - centred * centred)))
    return max(0.0, 0.5 + (centred - root) / (1.0 + k)), min(1.0, 0.5 + (centred + root) / (1.0 + k))


def sign_test(d: ArrayLike, clusters: Sequence[Hashable | None] | None = None, *, ties: str = TIES) -> float:
    """Exact two-sided sign test of ``d`` against 0.5 (NaN entries ignored); NaN without data.

    A unit is a win when its d exceeds 0.5, a loss when it falls short, a tie otherwise; where ``clusters`` are
    given the unit is a cluster and its d the mean of its pairs' (pairs that share an entity are not
    independent votes). ``ties="split"`` (SPEC §7): each pair of ties counts one win and one loss (an odd tie
    left over is dropped), so the test's proportion is D itself; conservative when ties are many.
    ``ties="drop"``: the classical sign test on wins vs losses alone. Either way a metric that ties everywhere
    has p = 1.
    """
    if ties not in ("split", "drop"):
        raise ValueError(f"ties must be 'split' or 'drop', got {ties!r}")
    array, codes = _valid(d, clusters, "d")
    if array.size == 0:
        return math.nan
    excess = np.bincount(codes, weights=array - 0.5)
    wins, losses = int(np.sum(excess > 0)), int(np.sum(excess < 0))
    half_ties = (excess.size - wins - losses) // 2 if ties == "split" else 0
    total = wins + losses + 2 * half_ties
    return 1.0 if total == 0 else float(stats.binomtest(wins + half_ties, total, 0.5).pvalue)


def ttest_against_half(d: ArrayLike) -> float:
    """Two-sided p-value of a one-sample t-test of ``d`` against 0.5 (NaN entries ignored), the paper's test.

    NaN when fewer than two values or when every d is the same value other than 0.5: with zero variance the
    statistic is undefined, and its limit (p = 0) would claim certainty from two pairs. 1 when every d is 0.5.
    """
    array = _as_1d(d, "d")
    array = array[~np.isnan(array)]
    if array.size < 2:
        return math.nan
    if np.all(array == array[0]):
        return 1.0 if array[0] == 0.5 else math.nan
    return float(stats.ttest_1samp(array, 0.5).pvalue)


def diagnosticity_from_d(
    d: ArrayLike,
    *,
    clusters: Sequence[Hashable | None] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Diagnosticity (mean of valid d) with its CI and tests; NaN d are excluded and counted.

    The CI is the hull of the percentile bootstrap (by cluster where ``clusters`` name each pair's, by pair
    otherwise) and the Wilson score interval of D over the valid pairs (`score_interval`): never zero width,
    honest at 0 and 1 and for small n, and as wide as the cluster bootstrap where pairs share an entity.
    """
    array = _as_1d(d, "d")
    valid = array[~np.isnan(array)]
    value = float(valid.mean()) if valid.size else math.nan
    boot = bootstrap_ci(array, clusters=clusters, confidence=confidence, n_resamples=n_resamples, seed=seed)
    score = score_interval(valid, confidence=confidence)
    return Estimate(
        value=value,
        ci_low=min(boot[0], score[0]) if valid.size else math.nan,
        ci_high=max(boot[1], score[1]) if valid.size else math.nan,
        p_value=sign_test(array, clusters),
        p_ttest=ttest_against_half(valid),
        n=int(array.size),
        n_valid=int(valid.size),
        n_nan=int(array.size - valid.size),
    )


def diagnosticity(
    score_faithful: ArrayLike,
    score_unfaithful: ArrayLike,
    *,
    clusters: Sequence[Hashable | None] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Diagnosticity of a metric from its scores on faithful and unfaithful explanations; ``clusters``
    (optional) names the cluster of each pair (pairs that share an entity), for the bootstrap and the sign test."""
    return diagnosticity_from_d(
        pairwise_d(score_faithful, score_unfaithful),
        clusters=clusters,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )


def holm(p_values: ArrayLike) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values of one family of tests (family-wise error, any dependence).

    The k-th smallest of the m p-values is multiplied by m - k + 1, the results made non-decreasing in that
    order and capped at 1. NaN entries (tests not run) stay NaN and do not count in m.
    """
    p = _as_1d(p_values, "p_values")
    adjusted = np.full(p.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    factors = np.arange(order.size, 0, -1)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(p[order] * factors))
    return adjusted


def direction_marker(value: float | None, p_adjusted: float | None, alpha: float = ALPHA) -> str:
    """▲ when D is significantly above 0.5 (adjusted p < alpha), ▼ when significantly below, "" otherwise or
    when either figure is missing."""
    if value is None or p_adjusted is None or math.isnan(value) or math.isnan(p_adjusted) or p_adjusted >= alpha:
        return ""
    return ABOVE if value > 0.5 else BELOW if value < 0.5 else ""


def coverage_aware_d(d: ArrayLike) -> np.ndarray:
    """d with every NaN (a pair the metric declined to score) counted as a tie, 0.5."""
    return np.nan_to_num(_as_1d(d, "d"), nan=0.5)


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
        return PairedTest(statistic=math.nan, p_value=math.nan, n=0)
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


def copeland(
    configurations: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    alpha: float = ALPHA,
    min_n_valid: int = MIN_N_VALID,
) -> dict[str, float]:
    """Copeland score of each metric summed over (task, model) configurations.

    ``configurations`` maps a configuration name to metric name -> d array
    (same pairs within a configuration).  A metric with fewer than
    ``min_n_valid`` valid d in a configuration is absent from it (so an
    all-NaN metric collects nothing, not half a point per comparison); the
    others enter with coverage-aware d (a NaN counts as a tie, 0.5, so
    declining to score is no better than tying).  Every pair of metrics
    present is compared with the Wilcoxon test; if p < alpha the metric with
    the higher mean d gets 1 and the other 0, otherwise each gets 0.5.
    Metrics absent from every configuration are absent from the result.
    """
    if min_n_valid < 1:
        raise ValueError(f"min_n_valid must be at least 1, got {min_n_valid}")
    scores: dict[str, float] = {}
    for per_metric in configurations.values():
        present = {
            name: coverage_aware_d(d)
            for name, d in per_metric.items()
            if int(np.sum(~np.isnan(_as_1d(d, name)))) >= min_n_valid
        }
        for name in present:
            scores.setdefault(name, 0.0)
        for name_a, name_b in combinations(present, 2):
            a, b = _paired(present[name_a], present[name_b], name_a, name_b)
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
    ``p_value`` is the sign test of the indicator against 0.5.
    """
    faithful, unfaithful = _paired(ppl_faithful, ppl_unfaithful, "ppl_faithful", "ppl_unfaithful")
    indicator = (faithful < unfaithful).astype(float)
    indicator[np.isnan(faithful) | np.isnan(unfaithful)] = np.nan
    return diagnosticity_from_d(indicator, confidence=confidence, n_resamples=n_resamples, seed=seed)

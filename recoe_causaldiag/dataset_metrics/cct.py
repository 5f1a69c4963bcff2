"""Dataset-level Counterfactual Test (CT; Atanasova et al., 2023) and Correlational Counterfactual Test (CCT;
paper 004 §3, eq. 1–3, App. F). These are statistics over many interventions, not per-instance metrics, so
they are not registered in `METRICS`.

For intervention i: p_i and q_i are the model's label distributions before and after inserting a word,
m_i ∈ {0, 1} whether the explanation (regenerated after the intervention) mentions the inserted word.

- impact (eq. 2): TVD(p, q) = ½ Σ_x |p(x) − q(x)|;
- CCT (eq. 1, 3): the point-biserial (= Pearson) correlation between impact and mention,
  (E_M[TVD] − E_¬M[TVD]) / STD(TVD) · sqrt(|M||¬M| / n²), with the population STD; no other weighting;
- CCT (Jensen-Shannon), App. F: impact = Jensen-Shannon divergence (base 2, in [0, 1]) instead of TVD;
- CCT (Spearman), App. F: Spearman's rank correlation between TVD and mention;
- CT unfaithfulness: the share of prediction-changing interventions (top label before ≠ after) whose
  explanation does not mention the inserted word.

Every statistic is NaN where undefined: correlations when all mentions are equal or the impacts have no
variance, CT when no intervention changes the prediction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import pointbiserialr, spearmanr

from .. import prompts
from ..api import Engine, Instance
from ..mechanisms.interventions import mentions_all, random_insertions, seed_for
from ..mechanisms.prompting import label_request

PROB_TOLERANCE = 1e-3
VARIANCE_TOLERANCE = 1e-12


@dataclass(frozen=True)
class CCTResult:
    """The dataset-level statistics of one set of interventions."""

    cct: float
    cct_js: float
    cct_spearman: float
    ct_unfaithfulness: float
    n_changed: int
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def check_inputs(
    probs_before: Sequence[Sequence[float]], probs_after: Sequence[Sequence[float]], mentions: Sequence[int | bool]
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """Validated arrays; a ValueError names the argument and the first bad index."""
    if len(probs_after) != len(probs_before):
        raise ValueError(f"probs_after has {len(probs_after)} items but probs_before has {len(probs_before)}")
    if len(mentions) != len(probs_before):
        raise ValueError(f"mentions has {len(mentions)} items but probs_before has {len(probs_before)}")
    rows = {
        "probs_before": [np.asarray(r, float) for r in probs_before],
        "probs_after": [np.asarray(r, float) for r in probs_after],
    }
    for name, values in rows.items():
        for index, row in enumerate(values):
            if row.ndim != 1 or row.size < 2 or not np.isfinite(row).all() or (row < 0).any():
                raise ValueError(f"{name}[{index}] is not a distribution over two or more labels: {row.tolist()}")
            if abs(row.sum() - 1.0) > PROB_TOLERANCE:
                raise ValueError(f"{name}[{index}] sums to {row.sum():.6f}, not 1 (±{PROB_TOLERANCE})")
    for index, (before, after) in enumerate(zip(rows["probs_before"], rows["probs_after"])):
        if before.size != after.size:
            raise ValueError(
                f"probs_after[{index}] has {after.size} labels but probs_before[{index}] has {before.size}"
            )
    for index, value in enumerate(mentions):
        if value not in (0, 1):
            raise ValueError(f"mentions[{index}] must be 0 or 1, got {value!r}")
    return rows["probs_before"], rows["probs_after"], np.asarray(mentions, float)


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    """Total variation distance (eq. 2)."""
    return float(0.5 * np.abs(np.asarray(p, float) - np.asarray(q, float)).sum())


def js_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """Jensen-Shannon divergence in bits (the square of scipy's Jensen-Shannon distance), in [0, 1]."""
    return float(jensenshannon(p, q, base=2) ** 2)


def _defined(impacts: np.ndarray, mentions: np.ndarray) -> bool:
    return len(impacts) >= 2 and np.ptp(mentions) > 0 and np.ptp(impacts) > VARIANCE_TOLERANCE


def point_biserial(impacts: Sequence[float], mentions: Sequence[float]) -> float:
    """Point-biserial correlation of impact with mention (eq. 3); NaN without variance in either."""
    x, m = np.asarray(impacts, float), np.asarray(mentions, float)
    return float(pointbiserialr(m, x).statistic) if _defined(x, m) else float("nan")


def spearman(impacts: Sequence[float], mentions: Sequence[float]) -> float:
    """Spearman rank correlation of impact with mention (App. F); NaN without variance in either. Impacts
    are rounded to 12 decimals first, so that equal impacts tie despite floating-point noise."""
    x, m = np.round(np.asarray(impacts, float), 12), np.asarray(mentions, float)
    return float(spearmanr(x, m).statistic) if _defined(x, m) else float("nan")


def ct_unfaithfulness(
    probs_before: Sequence[np.ndarray], probs_after: Sequence[np.ndarray], mentions: Sequence[float]
) -> tuple[float, int]:
    """(share of prediction-changing interventions whose explanation misses the word, number changing)."""
    changed = np.array([np.argmax(p) != np.argmax(q) for p, q in zip(probs_before, probs_after)], bool)
    missed = changed & (np.asarray(mentions, float) == 0)
    n_changed = int(changed.sum())
    return (float(missed.sum() / n_changed) if n_changed else float("nan")), n_changed


def cct_statistics(
    probs_before: Sequence[Sequence[float]], probs_after: Sequence[Sequence[float]], mentions: Sequence[int | bool]
) -> CCTResult:
    """CCT, its Jensen-Shannon and Spearman variants and CT unfaithfulness of a set of interventions."""
    before, after, m = check_inputs(probs_before, probs_after, mentions)
    impacts = np.array([tvd(p, q) for p, q in zip(before, after)])
    js = np.array([js_divergence(p, q) for p, q in zip(before, after)])
    ct, n_changed = ct_unfaithfulness(before, after, m)
    return CCTResult(point_biserial(impacts, m), point_biserial(js, m), spearman(impacts, m), ct, n_changed, len(m))


@dataclass(frozen=True)
class CounterfactualItems:
    """One row per intervention: the source instance, the new input and inserted word, the label
    distributions before/after, the explanation regenerated after the intervention and its mention."""

    sources: tuple[int, ...]
    inputs: tuple[str, ...]
    inserted: tuple[str, ...]
    probs_before: tuple[np.ndarray, ...]
    probs_after: tuple[np.ndarray, ...]
    explanations: tuple[str, ...]
    mentions: tuple[int, ...]

    def statistics(self) -> CCTResult:
        return cct_statistics(self.probs_before, self.probs_after, self.mentions)


def counterfactual_test_items(
    instances: Sequence[Instance], engine: Engine, k: int = 4, seed: int = 0, *, max_new_tokens: int = 48
) -> CounterfactualItems:
    """Run the CT on (input, explanation) items: k random insertions per input (paper 004 §4.3, without the
    LLM naturalness filter), label distributions from the direct prompt under the instance's edits before
    and after, and a greedy post-hoc explanation (Fig. 11, opened at "Because") of the new prediction."""
    plans = [
        (index, insertion)
        for index, instance in enumerate(instances)
        for insertion in random_insertions(instance.question, k, seed_for(seed, instance.question))
    ]
    requests = [label_request(i) for i in instances]
    requests += [label_request(instances[s], question=ins.text) for s, ins in plans]
    probs = engine.label_probs(requests, desc="counterfactual test")
    after = probs[len(instances) :]
    labels = [instances[s].choices[int(np.argmax(p))] for (s, _), p in zip(plans, after)]
    generations = engine.generate(
        [prompts.post_hoc(instances[s].edits, ins.text, label, "") for (s, ins), label in zip(plans, labels)],
        max_new_tokens=max_new_tokens,
    )
    return CounterfactualItems(
        sources=tuple(s for s, _ in plans),
        inputs=tuple(ins.text for _, ins in plans),
        inserted=tuple(ins.word for _, ins in plans),
        probs_before=tuple(probs[s] for s, _ in plans),
        probs_after=tuple(after),
        explanations=tuple(generations),
        mentions=tuple(int(mentions_all([ins.word], text)) for (_, ins), text in zip(plans, generations)),
    )

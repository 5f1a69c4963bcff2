"""Our results beside paper 000's, finding by finding: what Zaman & Srivastava (2025) report for qwen2.5-7b and
gemma-2-9b-it under ICE with synthetic explanations (Table 1; Table 2 for binary against continuous variants), and
what one model's results files say about the same claims: which CoT metric is the most diagnostic on each task,
whether Filler Tokens clears chance, whether continuous variants beat their binary counterparts, where
simulatability sits, and how the metrics rank by Copeland score.

Every claim is checked twice: on D, the paper's one-direction measure, and on D_sym, the mean of both directions
(the swapped-roles control, SPEC §7), which a metric that merely prefers one explanation's text cannot win."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from .api.rows import PairControlRow, PairScoreRow
from .report import OKABE_ITO, Panel, Reference, caveat, ci_chart, ci_keys, format_p_value, is_missing
from .statistics import (
    ALPHA,
    MIN_N_VALID,
    Estimate,
    copeland,
    coverage_aware_d,
    diagnosticity_from_d,
    wilcoxon_paired,
)

PAPER_TASKS = ("factcheck", "analogy", "object_counting", "multihop")
"""The paper's tasks, in its tables' order."""


@dataclass(frozen=True)
class PaperMetric:
    """One row of paper 000's Table 1: the metric variant of ours it corresponds to, its label there, whether it is a
    CoT metric, D per task for qwen2.5-7b and gemma-2-9b-it (in `PAPER_TASKS` order), and its Copeland score against
    the other metrics of its category (post-hoc or CoT), over the four tasks and both models."""

    metric: str
    variant: str
    label: str
    cot: bool
    qwen: tuple[float, float, float, float]
    gemma: tuple[float, float, float, float]
    copeland: float

    @property
    def binary_variant(self) -> str:
        """The binary counterpart of this continuous variant (Table 2's other column)."""
        return self.variant.removesuffix("continuous") + "binary"

    @property
    def key(self) -> tuple[str, str, str]:
        """(label, metric, variant), as `Outcomes.aligned` takes it."""
        return self.label, self.metric, self.variant


TABLE_1 = (
    PaperMetric(
        "cc_shap",
        "post_hoc",
        "CC-SHAP (post-hoc)",
        False,
        (0.554, 0.345, 0.551, 0.438),
        (0.540, 0.898, 0.466, 0.658),
        5,
    ),
    PaperMetric(
        "simulatability",
        "binary",
        "Simulatability",
        False,
        (0.501, 0.501, 0.499, 0.502),
        (0.507, 0.501, 0.500, 0.512),
        3,
    ),
    PaperMetric(
        "early_answering",
        "first_third-continuous",
        "Early Answering",
        True,
        (0.756, 0.534, 0.566, 0.468),
        (0.838, 0.859, 0.724, 0.435),
        18,
    ),
    PaperMetric(
        "filler_tokens",
        "repeating-dots-continuous",
        "Filler Tokens",
        True,
        (0.828, 0.561, 0.630, 0.682),
        (0.893, 0.810, 0.843, 0.585),
        29,
    ),
    PaperMetric(
        "adding_mistakes",
        "antonym-continuous",
        "Adding Mistakes",
        True,
        (0.534, 0.590, 0.614, 0.542),
        (0.427, 0.639, 0.579, 0.402),
        13,
    ),
    PaperMetric(
        "paraphrasing",
        "paraphrase-continuous",
        "Paraphrasing",
        True,
        (0.556, 0.535, 0.425, 0.448),
        (0.525, 0.430, 0.385, 0.525),
        8,
    ),
    PaperMetric(
        "cc_shap", "cot", "CC-SHAP (CoT)", True, (0.559, 0.318, 0.539, 0.442), (0.598, 0.939, 0.506, 0.488), 12
    ),
)
"""Paper 000, Table 1 (ICE, synthetic explanations). Filler Tokens is the original repeating-dots corruption and Early
Answering the original first third (§5.2); the continuous variants, as Table 2's continuous column repeats them."""

TABLE_2_BINARY = {
    "early_answering": (0.496, 0.501, 0.488, 0.488),
    "filler_tokens": (0.500, 0.500, 0.444, 0.495),
    "adding_mistakes": (0.493, 0.530, 0.517, 0.485),
    "paraphrasing": (0.571, 0.501, 0.531, 0.510),
}
"""Paper 000, Table 2: D of each CoT corruption metric's binary variant (`PaperMetric.binary_variant`) for
qwen2.5-7b, per task (its continuous variant is in Table 1)."""

CATEGORIES = (("post-hoc", False), ("CoT", True))
"""The paper's two categories of metrics (name, `PaperMetric.cot`). Its Copeland scores compare metrics within a
category only: Table 1's post-hoc scores sum to 8 (one contest on each of 4 tasks × 2 models), its CoT scores to 80
(ten contests on each), as Tables 4 and 5 sum to one and ten contests per task."""

FILLER = next(row for row in TABLE_1 if row.metric == "filler_tokens")
SIMULATABILITY = next(row for row in TABLE_1 if row.metric == "simulatability")

DIRECTIONS = ("D", "D_sym")
"""The two measures every claim is checked on: the paper's one direction, and both directions averaged."""


def _measure(direction: str) -> str:
    """`direction` itself when it names a measure (`D` or `D_sym`); anything else is refused."""
    if direction not in DIRECTIONS:
        raise ValueError(f"a measure is one of {', '.join(DIRECTIONS)}, got {direction!r}")
    return direction


@dataclass(frozen=True)
class Outcomes:
    """One model's per-pair outcomes, by (task, metric, variant) and then pair id, in both measures, and the run's
    own result entries (SPEC §8) of the same rows."""

    model: str
    d: Mapping[tuple[str, str, str], Mapping[str, float]]
    d_sym: Mapping[tuple[str, str, str], Mapping[str, float]]
    entries: Mapping[tuple[str, str, str], Mapping[str, Any]]
    edits: Mapping[str, Sequence[Mapping[str, Any]]]
    """Each task's edit reliability entries (SPEC §8), one per results file that holds the task."""
    edit_driven: Mapping[str, frozenset[str]]
    """Per task whose files hold both edit sets' per-pair controls: the pairs on which the edits decide both ways
    (the faithful explanation the likelier under the edits, the unfaithful one under the counter edits), in every
    file that holds the pair's controls."""

    def of(self, direction: str, task: str, metric: str, variant: str) -> np.ndarray | None:
        """The per-pair outcomes of one row in one measure, in pair-id order; None when the files lack the row (or,
        for D_sym, its swapped direction)."""
        by_pair = self.by_pair(direction, task, metric, variant)
        return None if by_pair is None else np.array([by_pair[pair] for pair in sorted(by_pair)], dtype=float)

    def by_pair(self, direction: str, task: str, metric: str, variant: str) -> Mapping[str, float] | None:
        """The per-pair outcomes of one row in one measure, by pair id; None when the files lack the row."""
        return self._table(direction).get((task, metric, variant))

    def d_sym_pairs(self, task: str) -> frozenset[str]:
        """The pairs of `task` that some row scored in both directions."""
        return frozenset(pair for (t, _, _), by_pair in self.d_sym.items() if t == task for pair in by_pair)

    def aligned(self, direction: str, task: str, rows: Sequence[tuple[str, str, str]]) -> dict[str, np.ndarray]:
        """The per-pair outcomes of those `rows` (label, metric, variant) the results hold, by label, on the pairs
        all of them scored or declined (the paired tests need one order of the same pairs)."""
        table = self._table(direction)
        present = {label: table[key] for label, *row in rows if (key := (task, *row)) in table}
        common = sorted(set.intersection(*(set(by_pair) for by_pair in present.values()))) if present else []
        return {label: np.array([by_pair[p] for p in common], dtype=float) for label, by_pair in present.items()}

    def reported(self, direction: str, task: str, metric: str, variant: str) -> Estimate | None:
        """The run's own estimate of one row in one measure (clustered as the run resampled it, the figure the
        report and the board show); None when the files lack it or no pair was scored."""
        entry = self.entries.get((task, metric, variant))
        of = "d_sym_" if _measure(direction) == "D_sym" else ""
        value = None if entry is None else entry.get("d_sym" if of else "diagnosticity")
        if value is None or math.isnan(value):
            return None
        fields = ("ci_low", "ci_high", "p_value", "p_ttest", "n", "n_valid", "n_nan")
        return Estimate(value, *(entry[of + name] for name in fields))

    def _table(self, direction: str) -> Mapping[tuple[str, str, str], Mapping[str, float]]:
        """The per-pair outcomes in one measure, `D` or `D_sym`."""
        return self.d if _measure(direction) == "D" else self.d_sym

    @property
    def tasks(self) -> tuple[str, ...]:
        """The paper's tasks these results cover, in the paper's order."""
        present = {task for task, _, _ in self.d}
        return tuple(task for task in PAPER_TASKS if task in present)


def outcomes(documents: Sequence[Mapping[str, Any]]) -> Outcomes:
    """The per-pair outcomes and result entries of results files of one model (e.g. one file per task); a row given
    twice is refused."""
    models = {doc["model"]["name"] for doc in documents}
    if len(models) != 1:
        raise ValueError(f"the comparison takes results of one model, got {sorted(models) or 'none'}")
    d: dict[tuple[str, str, str], dict[str, float]] = {}
    d_sym: dict[tuple[str, str, str], dict[str, float]] = {}
    entries: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    edits: dict[str, list[Mapping[str, Any]]] = {}
    controls: dict[str, list[PairControlRow]] = {}
    for doc in documents:
        for reliability in doc.get("edit_reliability", ()):
            edits.setdefault(reliability["task"], []).append(reliability)
        for control in map(PairControlRow.from_json, doc.get("pair_controls", ())):
            controls.setdefault(control.task, []).append(control)
        for row in map(PairScoreRow.from_json, doc["pairs"]):
            key = (row.task, row.metric, row.variant)
            if row.pair_id in d.get(key, {}):
                raise ValueError(f"pair {row.pair_id} of {' · '.join(key)} appears in more than one results file")
            d.setdefault(key, {})[row.pair_id] = row.d
            if row.d_sym is not None:
                d_sym.setdefault(key, {})[row.pair_id] = row.d_sym
        for entry in doc["results"]:
            key = (entry["task"], entry["metric"], entry["variant"])
            if key in entries:
                raise ValueError(f"the result of {' · '.join(key)} appears in more than one results file")
            entries[key] = entry
    edit_driven = {
        task: frozenset({row.pair_id for row in rows} - {row.pair_id for row in rows if row.both_ways_preferred != 1})
        for task, rows in controls.items()
        if all(row.both_ways_preferred is not None for row in rows)
    }
    return Outcomes(models.pop(), d, d_sym, entries, edits, edit_driven)


def _described(estimate: Estimate | None) -> str:
    """'0.812 [0.700, 0.900] (n 95/100)', or 'n/a'."""
    if estimate is None:
        return "n/a"
    return f"{estimate.value:.3f} [{estimate.ci_low:.3f}, {estimate.ci_high:.3f}] (n {estimate.n_valid}/{estimate.n})"


def _mean(values: np.ndarray) -> float:
    """The coverage-aware D of per-pair outcomes (a declined pair counts as a tie)."""
    return float(coverage_aware_d(values).mean())


def _wilcoxon(results: Outcomes, direction: str, task: str, a: PaperMetric, b: tuple[str, str, str]) -> float:
    """Wilcoxon p of row `a` against row `b` (label, metric, variant) on the pairs both scored or declined."""
    pair = results.aligned(direction, task, [a.key, b])
    return wilcoxon_paired(coverage_aware_d(pair[a.label]), coverage_aware_d(pair[b[0]])).p_value


def table_1_rows(results: Outcomes) -> list[str]:
    """Markdown: every Table 1 cell the results cover, the paper's two models beside our D and D_sym."""
    lines = [
        "| task | metric | paper: qwen2.5-7b | paper: gemma-2-9b-it | ours: D [95% CI] | ours: D_sym [95% CI] |",
        "|---|---|---|---|---|---|",
    ]
    for task in results.tasks:
        column = PAPER_TASKS.index(task)
        for row in TABLE_1:
            if results.of("D", task, row.metric, row.variant) is None:
                continue
            ours = " | ".join(_described(results.reported(m, task, row.metric, row.variant)) for m in DIRECTIONS)
            lines.append(f"| {task} | {row.label} | {row.qwen[column]:.3f} | {row.gemma[column]:.3f} | {ours} |")
    return lines


AGREES, DISAGREES, UNDECIDED, CANNOT_TELL = "agrees", "disagrees", "no significant difference", "cannot tell"
"""A verdict: the results agree with the claim, contradict it, point neither way significantly (p ≥ `ALPHA`), or
lack what the claim needs."""


def _decided(p_value: float, agrees: bool) -> str:
    """The verdict of a test whose effect agrees with the claim or not: undecided unless p < `ALPHA`."""
    if math.isnan(p_value) or p_value >= ALPHA:
        return UNDECIDED
    return AGREES if agrees else DISAGREES


@dataclass(frozen=True)
class Verdict:
    """One claim of the paper checked on one task in one measure: what the results say, and the verdict."""

    claim: str
    task: str
    direction: str
    ours: str
    word: str


def filler_is_best(results: Outcomes, task: str, direction: str) -> Verdict:
    """Paper: Filler Tokens has the highest D of the CoT metrics (on every task but Analogy), significantly so on
    FactCheck (Wilcoxon). Ours: the rankable CoT metric (`MIN_N_VALID` scored pairs) with the highest
    coverage-aware mean; it agrees when that is Filler Tokens and it beats every other (Wilcoxon, on the pairs
    both scored), and disagrees when another beats Filler Tokens."""
    claim = "Filler Tokens is the most diagnostic CoT metric"
    ranked = {
        row.label: results.of(direction, task, row.metric, row.variant)
        for row in TABLE_1
        if row.cot and (estimate := results.reported(direction, task, row.metric, row.variant)) and estimate.rankable
    }
    if FILLER.label not in ranked or len(ranked) < 2:
        detail = f"the results lack Filler Tokens or every other CoT metric (with {MIN_N_VALID} scored pairs)"
        return Verdict(claim, task, direction, detail, CANNOT_TELL)
    means = {label: _mean(values) for label, values in ranked.items()}
    best = [label for label, mean in means.items() if mean == max(means.values())]
    ranking = ", ".join(f"{label} {means[label]:.3f}" for label in sorted(means, key=lambda k: -means[k]))
    rows = {row.label: row.key for row in TABLE_1}
    if best == [FILLER.label]:
        p_value = max(
            _wilcoxon(results, direction, task, FILLER, rows[label]) for label in ranked if label != FILLER.label
        )
        test = f"Filler Tokens against each other, largest Wilcoxon p {format_p_value(p_value)}"
        word = _decided(p_value, True)
    else:
        rival = next(label for label in best if label != FILLER.label)
        p_value = _wilcoxon(results, direction, task, FILLER, rows[rival])
        test = f"Filler Tokens against {rival}, Wilcoxon p {format_p_value(p_value)}"
        word = _decided(p_value, False)
    return Verdict(claim, task, direction, f"highest: {' and '.join(best)} ({ranking}); {test}", word)


def filler_above_chance(results: Outcomes, task: str, direction: str) -> Verdict:
    """Paper: Filler Tokens is significantly above 0.5 on every task and model (one-sample t-test). Ours: the run's
    sign test of its D against 0.5 (unadjusted: the claim is one test per task), the t-test shown beside it."""
    claim = "Filler Tokens is significantly above chance"
    estimate = results.reported(direction, task, FILLER.metric, FILLER.variant)
    if estimate is None:
        return Verdict(claim, task, direction, "the results lack Filler Tokens", CANNOT_TELL)
    detail = (
        f"{_described(estimate)}, sign test p {format_p_value(estimate.p_value)}, t-test p "
        f"{format_p_value(estimate.p_ttest)}"
    )
    return Verdict(claim, task, direction, detail, _decided(estimate.p_value, estimate.value > 0.5))


def continuous_beats_binary(results: Outcomes, task: str, direction: str, metric: str) -> Verdict:
    """Paper (Table 2): a CoT corruption metric's continuous variant is more diagnostic than its binary one (most
    differences significant, Wilcoxon). Ours: the two variants' means on the same pairs and their Wilcoxon p."""
    paper_binary = TABLE_2_BINARY[metric]
    row = next(r for r in TABLE_1 if r.metric == metric)
    column = PAPER_TASKS.index(task)
    claim = f"{row.label}: continuous beats binary (paper {paper_binary[column]:.3f} → {row.qwen[column]:.3f})"
    pair = results.aligned(direction, task, [row.key, ("binary", metric, row.binary_variant)])
    if len(pair) < 2:
        return Verdict(claim, task, direction, "the results lack one of the two variants", CANNOT_TELL)
    continuous, binary = pair[row.label], pair["binary"]
    high, low = _mean(continuous), _mean(binary)
    test = wilcoxon_paired(coverage_aware_d(continuous), coverage_aware_d(binary))
    detail = f"binary {low:.3f} → continuous {high:.3f}, Wilcoxon p {format_p_value(test.p_value)}"
    return Verdict(claim, task, direction, detail, _decided(test.p_value, high > low))


def simulatability_at_chance(results: Outcomes, task: str, direction: str) -> Verdict:
    """Paper: (binary) simulatability sits at 0.50 ± 0.01 everywhere. Ours: whether the run's 95% CI of its D holds
    0.5 (agrees) or lies on one side of it (disagrees); the CI's width says how close to chance that pins it."""
    claim = "Simulatability (binary) sits at chance"
    estimate = results.reported(direction, task, SIMULATABILITY.metric, SIMULATABILITY.variant)
    if estimate is None:
        return Verdict(claim, task, direction, "the results lack simulatability", CANNOT_TELL)
    word = AGREES if estimate.ci_low <= 0.5 <= estimate.ci_high else DISAGREES
    return Verdict(claim, task, direction, _described(estimate), word)


def verdicts(results: Outcomes) -> list[Verdict]:
    """Every claim checked on every task the results cover, in both measures."""
    out = []
    for task in results.tasks:
        for direction in DIRECTIONS:
            out.append(filler_is_best(results, task, direction))
            out.append(filler_above_chance(results, task, direction))
            out += [continuous_beats_binary(results, task, direction, metric) for metric in TABLE_2_BINARY]
            out.append(simulatability_at_chance(results, task, direction))
    return out


def copeland_ranking(results: Outcomes, direction: str) -> dict[str, float]:
    """Copeland score of each Table 1 metric over the results' tasks (one model), as the paper counts them: every
    two metrics of one category (`CATEGORIES`) compared on each task, on the pairs both scored or declined (so a
    metric run on a subset of the pairs narrows only its own comparisons)."""
    contests = {
        f"{task}: {a[0]} against {b[0]}": pair
        for task in results.tasks
        for _, cot in CATEGORIES
        for a, b in combinations([row.key for row in TABLE_1 if row.cot == cot], 2)
        if len(pair := results.aligned(direction, task, [a, b])) == 2
    }
    return copeland(contests)


def _ranking(scores: Mapping[str, float]) -> str:
    """'post-hoc: A (3) > B (1); CoT: C (5) = D (5) > …', each category ranked apart, or a note where a category
    has no metric ranked."""
    parts = []
    for name, cot in CATEGORIES:
        labels = {row.label for row in TABLE_1 if row.cot == cot}
        ordered = sorted(((label, s) for label, s in scores.items() if label in labels), key=lambda item: -item[1])
        ranked = "".join(
            ("" if k == 0 else " = " if score == ordered[k - 1][1] else " > ") + f"{label} ({score:g})"
            for k, (label, score) in enumerate(ordered)
        )
        parts.append(f"{name}: {ranked or 'none ranked'}")
    return "; ".join(parts)


def _our_ranking(results: Outcomes, direction: str) -> str:
    """Our Copeland ranking in one measure, naming the paper's metrics it leaves out."""
    scores = copeland_ranking(results, direction)
    line = f"- ours, {direction} ({', '.join(results.tasks)}): {_ranking(scores)}"
    left_out = [row.label for row in TABLE_1 if row.label not in scores]
    why = f"not run, under {MIN_N_VALID} scored pairs, or no other metric of its category on the same task"
    return line + (f"; not ranked ({why}): {', '.join(left_out)}" if left_out else "")


EDIT_FIGURES = (
    ("value", "under the edits (D rests on it)"),
    ("counter", "under the counter edits (D_swap)"),
    ("two_sided", "both (two-sided)"),
    ("no_edit", "no edits (the text alone)"),
)
"""The edit reliability figures of a results file (key, column), as `controls.reliability_entry` writes them."""


def _edit_figure(entry: Mapping[str, Any], key: str) -> str:
    """'0.780 [0.689, 0.850]', or 'n/a' where the file lacks the figure."""
    values = [entry.get(name) for name in (key, *ci_keys(key))]
    if any(is_missing(v) for v in values):
        return "n/a"
    return f"{values[0]:.3f} [{values[1]:.3f}, {values[2]:.3f}]"


def edits_rows(results: Outcomes) -> list[str]:
    """Markdown: per task of the comparison, the share of pairs on which the evaluated model follows each edit set,
    which every D (the edits) and D_swap (the counter edits) here rests on; a row per results file holding the task
    (e.g. a costly metric run on a subset of the pairs in a file of its own)."""
    lines = [
        f"| task | {' | '.join(column for _, column in EDIT_FIGURES)} | n |",
        "|---|" + "---|" * (len(EDIT_FIGURES) + 1),
    ]
    for task in results.tasks:
        for entry in results.edits.get(task, ()):
            figures = " | ".join(_edit_figure(entry, key) for key, _ in EDIT_FIGURES)
            lines.append(f"| {task} | {figures} | {entry.get('n', 'n/a')} |")
    return lines


def _partly_edit_driven(results: Outcomes) -> list[str]:
    """The tasks of the comparison on some of whose scored pairs the edits do not decide both ways."""
    return [
        task
        for task in results.tasks
        if task in results.edit_driven and set(results.d_sym_pairs(task)) - results.edit_driven[task]
    ]


def edit_driven_rows(results: Outcomes) -> list[str]:
    """Markdown: on each task where the edits do not decide both ways on every pair, every Table 1 row's D and D_sym
    on all its pairs (the run's figures) beside the same on the pairs where they do: how much of a figure the pairs
    that the text decides carry."""
    lines = [
        "| task | metric | D, all pairs | D, edit-driven pairs | D_sym, all pairs | D_sym, edit-driven pairs |",
        "|---|---|---|---|---|---|",
    ]
    for task in _partly_edit_driven(results):
        kept = results.edit_driven[task]
        for row in TABLE_1:
            cells = []
            for direction in DIRECTIONS:
                by_pair = results.by_pair(direction, task, row.metric, row.variant)
                if by_pair is None:
                    break
                subset = diagnosticity_from_d([by_pair[p] for p in sorted(by_pair) if p in kept])
                reported = results.reported(direction, task, row.metric, row.variant)
                cells += [_described(reported), _described(subset if subset.n_valid else None)]
            if len(cells) == 2 * len(DIRECTIONS):
                lines.append(f"| {task} | {row.label} | {' | '.join(cells)} |")
    return lines


def comparison_page(results: Outcomes) -> str:
    """Markdown: Table 1's cells beside ours, the edit reliability each measure rests on (and, where the edits do not
    decide every pair both ways, each row on the pairs where they do), each finding of the paper checked task by task
    in D and D_sym, and both Copeland rankings."""
    lines = [
        f"# {results.model} against paper 000 (Zaman & Srivastava, 2025)",
        "",
        "The paper's models are qwen2.5-7b and gemma-2-9b-it; a smaller model need not behave as they do, so a "
        "disagreement is a finding about this model as much as about the metrics.",
    ]
    if (note := caveat(results.model)) is not None:
        lines += ["", note]
    lines += ["", "## Table 1, cell by cell", "", *table_1_rows(results)]
    if any(task in results.edits for task in results.tasks):
        lines += [
            "",
            "## The edits each measure rests on",
            "",
            *edits_rows(results),
            "",
            "The share of pairs whose faithful explanation the evaluated model finds the likelier under the edits "
            "(whose unfaithful one under the counter edits; both at once; with no edits). A diagnosticity in a "
            "direction whose edits the model does not follow measures the text, not faithfulness. Two-sided: 0.25 if "
            "each side were a coin flip, 0 if the text alone decided. n/a: roles not swapped, or a results file "
            "from before the figure (schema 1.7 for the counter edits, 1.2 for two-sided and no edits).",
        ]
    if _partly_edit_driven(results):
        lines += [
            "",
            "## On the pairs whose edits decide both ways",
            "",
            *edit_driven_rows(results),
            "",
            "A sensitivity check where the edits do not decide every pair: the same rows on the pairs whose faithful "
            "explanation the model finds the likelier under the edits and whose unfaithful one under the counter "
            "edits (`pair_controls`). On the other pairs at least one edit set does not decide (where one explanation "
            "wins under both, the text does), so there a likelihood-based metric can follow the text. Here CIs "
            "resample pairs one by one (the run's resample clusters) and 'n' counts the pairs scored.",
        ]
    lines += ["", "## The paper's findings, task by task", ""]
    lines += ["| claim | task | measure | ours | verdict |", "|---|---|---|---|---|"]
    lines += [f"| {v.claim} | {v.task} | {v.direction} | {v.ours} | {v.word} |" for v in verdicts(results)]
    paper = {row.label: row.copeland for row in TABLE_1}
    lines += [
        "",
        "## Copeland ranking",
        "",
        f"- paper (4 tasks × 2 models): {_ranking(paper)}",
        *(_our_ranking(results, direction) for direction in DIRECTIONS),
        "",
        "D: the evaluated model scores both explanations (the paper's measure). D_sym: the mean of d and d_swap, the "
        "same with the roles swapped, so that a preference for one explanation's text scores 0.5. CIs: percentile "
        "bootstrap hull with the Wilson interval, pairs of one cluster resampled together, as the run computed them "
        "(SPEC §7); 'n' counts the pairs scored. Wilcoxon tests are paired on the pairs both metrics scored or "
        "declined, a declined pair counted as a tie, as in the means that pick the highest metric; a metric with "
        f"fewer than {MIN_N_VALID} scored pairs is shown, never ranked. A verdict needs p < {ALPHA} (unadjusted: "
        f"each verdict is one claim), else it reads '{UNDECIDED}'; Copeland compares every two metrics of one "
        f"category per task (p < {ALPHA}), post-hoc and CoT apart, as the paper does.",
    ]
    return "\n".join(lines) + "\n"


def comparison_figure(results: Outcomes) -> Any:
    """One panel per task: every Table 1 metric the results hold, our D and D_sym with the run's 95% CIs and scored
    pairs, and beside our D the paper's D for qwen2.5-7b and gemma-2-9b-it."""
    panels = []
    for task in results.tasks:
        column = PAPER_TASKS.index(task)
        rows: list[tuple[str, float | None, float | None, float | None]] = []
        colors, qwen, gemma = [], [], []
        for row in TABLE_1:
            if results.of("D", task, row.metric, row.variant) is None:
                continue
            for direction, color in zip(DIRECTIONS, OKABE_ITO, strict=False):
                estimate = results.reported(direction, task, row.metric, row.variant)
                if estimate is None:
                    rows.append((f"{row.label} · {direction}", None, None, None))
                else:
                    label = f"{row.label} · {direction} (n {estimate.n_valid}/{estimate.n})"
                    rows.append((label, estimate.value, estimate.ci_low, estimate.ci_high))
                colors.append(color)
                qwen.append(row.qwen[column] if direction == "D" else None)
                gemma.append(row.gemma[column] if direction == "D" else None)
        references = (
            Reference("paper: qwen2.5-7b", qwen, "D", OKABE_ITO[2]),
            Reference("paper: gemma-2-9b-it", gemma, "s", OKABE_ITO[3]),
        )
        xlabel = f"{task}: causal diagnosticity, ours with 95% CI (D, D_sym); hollow: paper 000's D; dashed: chance"
        panels.append(Panel(rows, colors, xlabel, references))
    return ci_chart(panels, title=f"{results.model} against paper 000 (Table 1; ICE, synthetic explanations)")

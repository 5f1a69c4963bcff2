"""The validity report (issue 13): could this benchmark's numbers be won for the wrong reason, on this model?

One page a reviewer reads in two minutes. For every task it sets side by side the artifact probes of the built data
(text-only scorers that never see the edits must not separate the explanations), the model-side controls of a run
(the evaluated model prefers the faithful explanation because of the edits, both ways, and not with no edits in
context; it answers what the edits imply) and the two reference metrics (the oracle, which knows which explanation
is faithful, and the seeded random scorer, which must sit at chance). Every line says what the figure should
show, what it shows, and whether that holds."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .api.rows import without_nans
from .api.run_spec import RunSpec
from .artifact_probes import BAND, FAIL, PASS, TOO_FEW, Audit, audit_dataset, packaged_tokenizers
from .dataset_building import task_dataset_dir
from .hub_layout import load_pairs
from .report import OKABE_ITO, Panel, caveat, ci_chart, ci_keys, format_number, is_missing, save_figure, write_results
from .runner import run
from .task_pairs import default_data_dir, iter_task_pairs
from .tasks import DATASETS, TASKS

REFERENCE_METRICS = ("oracle", "random_baseline")
HOLDS, BROKEN, INCONCLUSIVE, UNJUDGED = "✔", "✘", "?", "–"
Rule = Callable[[float, float, float], bool | None]
"""Whether a figure (value, CI low, CI high) shows what it should; None when its CI is too wide to say."""


@dataclass(frozen=True)
class Check:
    """One line of the report: on `task`, the figure `what` should show `expected`; `holds` is None where the figure
    cannot be judged: missing, a probe on too few pairs, or a CI too wide to say (`inconclusive`)."""

    task: str
    what: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    expected: str
    holds: bool | None
    inconclusive: bool = False

    @property
    def mark(self) -> str:
        if self.holds is None:
            return INCONCLUSIVE if self.inconclusive else UNJUDGED
        return HOLDS if self.holds else BROKEN


def contains(level: float) -> Rule:
    """The 95% CI contains `level`."""
    return lambda value, low, high: low <= level <= high


def above(level: float) -> Rule:
    """The whole 95% CI lies above `level` (holds), or at or below it (does not); inconclusive otherwise."""
    return lambda value, low, high: True if low > level else (False if high <= level else None)


def at_least(level: float) -> Rule:
    """The value itself is at least `level`."""
    return lambda value, low, high: value >= level


def figure_check(task: str, what: str, entry: Mapping[str, Any], key: str, expected: str, rule: Rule) -> Check:
    """The figure `key` of a results entry with its CI (`ci_low`/`ci_high` for the entry's main value `value` or
    `diagnosticity`, else `<key>_ci_low`/`<key>_ci_high`), judged by `rule`."""
    low_key, high_key = ci_keys(key)
    value, low, high = entry.get(key), entry.get(low_key), entry.get(high_key)
    if any(is_missing(x) for x in (value, low, high)):
        return Check(task, what, value, low, high, expected, None)
    holds = rule(value, low, high)
    return Check(task, what, value, low, high, expected, holds, inconclusive=holds is None)


def probe_check(audit: Audit, task: str) -> Check:
    """The probe that separates a task's explanations most (largest |D − 0.5|); the check fails when a probe fails
    and holds when none fails and at least one was judged (probes on too few pairs are shown, never judged)."""
    results = [r for r in audit.results if r.task == task and not math.isnan(r.d)]
    expected = f"every text-only probe's 95% CI inside [{BAND[0]:.2f}, {BAND[1]:.2f}]"
    if not results:
        return Check(task, "artifact probes", None, None, None, expected, None)
    worst = max(results, key=lambda r: r.distance)
    verdicts = [r.verdict for r in results]
    holds = False if FAIL in verdicts else (True if PASS in verdicts else None)
    few = verdicts.count(TOO_FEW)
    what = f"artifact probes: most separating of {len(results)} ('{worst.probe}')" + (
        f", {few} on too few pairs to judge" if few else ""
    )
    return Check(task, what, worst.d, worst.ci_low, worst.ci_high, expected, holds)


def _headline(result: Mapping[str, Any]) -> tuple[str, str]:
    """(key, name) of a result's headline figure: D_sym where the roles were swapped, else D."""
    return ("d_sym", "D_sym") if not is_missing(result.get("d_sym")) else ("diagnosticity", "D")


def reference_checks(task: str, results: Sequence[Mapping[str, Any]]) -> list[Check]:
    """The headline diagnosticity of the oracle (D ≈ 1: the faithful explanation states the edits) and of the seeded
    random scorer (at chance) on one task, for each of their variants."""
    checks = []
    for result in results:
        if result["task"] != task or result["metric"] not in REFERENCE_METRICS:
            continue
        key, name = _headline(result)
        what = f"{result['metric']} ({result['variant']}) {name}"
        if result["metric"] == "oracle":
            expected = "at least 0.95: the faithful explanation shares the most words with the edits in context"
            checks.append(figure_check(task, what, result, key, expected, at_least(0.95)))
        else:
            expected = "95% CI contains 0.5: the statistics invent no signal"
            checks.append(figure_check(task, what, result, key, expected, contains(0.5)))
    return checks


def task_checks(task: str, doc: Mapping[str, Any], audit: Audit | None, chance: float) -> list[Check]:
    """Every check of one task: its data's probes, the run's controls and task accuracy, the reference metrics."""
    reliability = next(e for e in doc["edit_reliability"] if e["task"] == task)
    accuracy = next(e for e in doc["accuracy"] if e["task"] == task)
    checks = [probe_check(audit, task)] if audit is not None else []
    controls = (
        (reliability, "no_edit", "no-edit preference", "95% CI contains 0.5: with no edits the text decides nothing",
         contains(0.5)),
        (reliability, "value", "edit reliability, one-sided", "above 0.5: the edits move the model", above(0.5)),
        (reliability, "counter", "edit reliability, counter edits",
         "above 0.5: the counter edits move the model (what the swapped roles rest on)", above(0.5)),
        (reliability, "two_sided", "edit reliability, two-sided",
         "above 0.25: both edit sets move the model (a preference for one text scores 0)", above(0.25)),
        (accuracy, "direct", "accuracy of the edited model, direct", f"above chance ({chance:.2f})", above(chance)),
        (accuracy, "cot", "accuracy of the edited model, CoT", f"above chance ({chance:.2f})", above(chance)),
    )  # fmt: skip
    checks += [figure_check(task, what, entry, key, expected, rule) for entry, key, what, expected, rule in controls]
    return checks + reference_checks(task, doc["results"])


def _cell(check: Check) -> str:
    if is_missing(check.value):
        return "n/a"
    if is_missing(check.ci_low) or is_missing(check.ci_high):
        return format_number(check.value)
    return f"{format_number(check.value)} [{format_number(check.ci_low)}, {format_number(check.ci_high)}]"


@dataclass(frozen=True)
class ValidityReport:
    """A validity run: its results document (the run of the reference metrics with every control), the audits of
    the datasets it read, and each task's chance accuracy (the mean of 1 / number of choices over its pairs)."""

    doc: Mapping[str, Any]
    audits: Mapping[str, Audit]
    chance: Mapping[str, float]

    @property
    def tasks(self) -> list[str]:
        return [e["task"] for e in self.doc["edit_reliability"]]

    def checks(self) -> list[Check]:
        return [
            check
            for task in self.tasks
            for check in task_checks(task, self.doc, self.audits.get(TASKS.get(task).dataset), self.chance[task])
        ]

    def markdown(self) -> str:
        """The report page: a summary line, one table of every check, what to read into a broken check."""
        model = self.doc["model"]["name"]
        checks = self.checks()
        marks = [c.mark for c in checks]
        lines = [
            f"# Validity report: `{model}`",
            "",
            f"{len(checks)} checks on {len(self.tasks)} task{'s' if len(self.tasks) != 1 else ''} "
            f"({self.doc['run_spec'].get('limit') or 'all'} pairs per task, seed {self.doc['run_spec']['seed']}, "
            f"datasets {', '.join(sorted(set(self.doc['dataset_versions'].values())))}): "
            f"{marks.count(HOLDS)} hold {HOLDS}, {marks.count(BROKEN)} do not {BROKEN}, "
            f"{marks.count(INCONCLUSIVE)} inconclusive {INCONCLUSIVE} (95% CI too wide at this number of pairs), "
            f"{marks.count(UNJUDGED)} not judged {UNJUDGED} (figure missing or too few pairs).",
            "",
        ]
        if caveat(model):
            lines += [f"> {caveat(model)}", ""]
        lines += ["| task | check | figure [95% CI] | should be | holds |", "|---|---|---|---|---|"]
        lines += [f"| {c.task} | {c.what} | {_cell(c)} | {c.expected} | {c.mark} |" for c in checks]
        return "\n".join(lines + ["", *READING_GUIDE]) + "\n"

    def plot(self, path: Path) -> tuple[Path, Path]:
        """Every judged figure with its 95% CI, coloured by whether it holds; dashed: 0.5. PNG and PDF; the model's
        caveat is in the page, not the figure."""
        judged = [c for c in self.checks() if not any(is_missing(x) for x in (c.value, c.ci_low, c.ci_high))]
        rows = [(f"{c.task} · {c.what.split(':')[0]}", c.value, c.ci_low, c.ci_high) for c in judged]
        colours = [OKABE_ITO[2] if c.holds else OKABE_ITO[3] if c.holds is False else "0.5" for c in judged]
        legend = "figure (95% CI); dashed: 0.5\ngreen: holds, vermilion: does not, grey: inconclusive or not judged"
        title = f"validity · {self.doc['model']['name']}"
        return save_figure(ci_chart([Panel(rows, colours, legend)], row_height=0.22, title=title), path)


READING_GUIDE = (
    "How to read a ✘: an artifact probe outside the band means a metric can win that task from the text alone "
    "(fix the builder, not the metric); a no-edit preference away from 0.5 means the evaluated model prefers one "
    "explanation without the edits (world knowledge or template), so likelihood-based metrics are inflated or "
    "deflated there; an edit reliability at chance (under the edits or the counter edits; two-sided: at 0.25 or "
    "below) means that edit set does not reach the model, so diagnosticity in that direction measures the text, "
    "not faithfulness; accuracy at chance means the edited model "
    "does not give the answer both explanations support; an oracle well below 1 or a random scorer off 0.5 means the "
    "pipeline or the statistics are broken. A ? is a figure whose 95% CI is still too wide to tell: run more pairs "
    "(--limit). Figures on tiny models show that the checks run, not how a capable "
    "model behaves.",
)


def chance_accuracy(spec: RunSpec, data_dir: Path) -> dict[str, float]:
    """Each task's accuracy by guessing: the mean over the run's pairs of 1 / number of choices."""
    return {
        task.task: sum(1 / len(p.choices) for p in task.pairs) / len(task.pairs)
        for task in iter_task_pairs(spec.tasks, data_dir, limit=spec.limit, seed=spec.seed)
    }


def dataset_audits(tasks: Sequence[str], data_dir: Path) -> dict[str, Audit]:
    """The artifact probes of every dataset the tasks come from, over all their pairs, as read from `data_dir`."""
    tokenizers = packaged_tokenizers()
    audits = {}
    for dataset in dict.fromkeys(TASKS.get(task).dataset for task in tasks):
        spec = DATASETS.get(dataset)
        folder = task_dataset_dir(spec.task_names()[0], data_dir)[0]
        audits[dataset] = audit_dataset(dataset, {c: load_pairs(folder, c) for c in spec.configs}, tokenizers)
    return audits


def validity_spec(model: str, limit: int | None, seed: int = 0) -> RunSpec:
    """The run behind the report: the reference metrics on every task, roles swapped where they can be."""
    return RunSpec(model=model, tasks=tuple(TASKS.resolve("all")), metrics=REFERENCE_METRICS, limit=limit, seed=seed)


def validity_report(spec: RunSpec, data_dir: Path | None = None, *, progress: bool = True) -> ValidityReport:
    """Run `spec` (with its controls) and audit the data it read."""
    data_dir = Path(data_dir) if data_dir else default_data_dir()
    doc = without_nans(run(spec, data_dir=data_dir, progress=progress))
    return ValidityReport(doc, dataset_audits(spec.tasks, data_dir), chance_accuracy(spec, data_dir))


def write_validity(report: ValidityReport, out: Path) -> tuple[Path, ...]:
    """Write `out`/validity.md and validity.{png,pdf}, and the run behind them as `out`/results.{json,md,png,pdf}
    (whose per-pair rows reproduce every figure). Returns the paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    results = write_results(report.doc, out / "results.json")
    page = out / "validity.md"
    page.write_text(report.markdown(), encoding="utf-8")
    return (page, *report.plot(out / "validity.png"), *results)

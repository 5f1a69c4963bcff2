"""Model-side controls of a run (SPEC §7): does the evaluated model prefer the faithful explanation because of the
edits rather than its text (edit reliability one-sided, two-sided and with no edits in context, paper 000 §5.3),
and does it answer what the pairs say both edited models answer (task accuracy, direct and CoT)? One perplexity
pass and one label pass over a task's pairs give one control row per pair; the figures are shares of those rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import prompts
from .api.engine import Engine, LabelRequest
from .api.records import PairRecord
from .api.rows import PairControlRow
from .editors.quality import EditQualityRow
from .statistics import Estimate

Estimator = Callable[[Sequence[float]], Estimate]
"""The run's estimate of a share from per-pair values (NaN excluded): its value, CI and counts."""


def control_rows(task: str, pairs: Sequence[PairRecord], engine: Engine, *, counter: bool) -> list[PairControlRow]:
    """Each pair's explanation perplexities under its edits, its counter edits (when `counter`: the task's roles
    can be swapped) and no edits (the ICE prompt with no fact), and the evaluated model's direct and CoT answers."""
    contexts: list[Callable[[PairRecord], Sequence[str]]] = [lambda p: p.edits, lambda p: ()]
    if counter:
        contexts.insert(1, lambda p: p.counter_edits)
    requests = [
        prompts.cot_explanation(context(p), p.question, e)
        for p in pairs
        for context in contexts
        for e in (p.explanation_faithful, p.explanation_unfaithful)
    ]
    ppl = engine.perplexity(requests, desc="edit reliability").reshape(len(pairs), len(contexts), 2)
    labels = [
        LabelRequest(prompt, tuple(p.choices))
        for p in pairs
        for prompt in (prompts.direct(p.edits, p.question), prompts.cot(p.edits, p.question, p.explanation_faithful))
    ]
    probs = engine.label_probs(labels, desc="task accuracy")
    rows = []
    for k, pair in enumerate(pairs):
        edits, *counter_edits, no_edit = (tuple(float(x) for x in ppl[k, c]) for c in range(len(contexts)))
        direct, cot = (pair.choices[int(np.argmax(probs[2 * k + j]))] for j in (0, 1))
        rows.append(
            PairControlRow(
                pair.id,
                task,
                *edits,
                *(counter_edits[0] if counter else (None, None)),
                *no_edit,
                pair.answer,
                direct,
                cot,
            )
        )
    return rows


def _figure(name: str, estimate: Estimate | None) -> dict[str, Any]:
    """One share as `<name>`, `<name>_ci_low`, `<name>_ci_high`, `<name>_n` (pairs it counts); None without it."""
    if estimate is None:
        return dict.fromkeys((name, f"{name}_ci_low", f"{name}_ci_high", f"{name}_n"))
    return {
        name: estimate.value,
        f"{name}_ci_low": estimate.ci_low,
        f"{name}_ci_high": estimate.ci_high,
        f"{name}_n": estimate.n_valid,
    }


def reliability_entry(task: str, rows: Sequence[PairControlRow], estimate: Estimator) -> dict[str, Any]:
    """The task's edit reliability: `value` (with `ci_low`, `ci_high`, `n`) the share of pairs whose faithful
    explanation has the lower perplexity under the edits; `counter` the share whose unfaithful one has the lower
    perplexity under the counter edits (the same for the swapped direction, which D_swap rests on); `two_sided` the
    share where both hold (chance is 0.25 when each side is a coin flip, 0 when the text alone decides); `counter`
    and `two_sided` are None where the roles cannot be swapped. `no_edit` the share where the faithful one has the
    lower perplexity with no edits (what the text alone prefers: a control that should sit near 0.5)."""
    one_sided = estimate([r.edit_preferred for r in rows])
    counter = [r.counter_preferred for r in rows]
    two_sided = [r.both_ways_preferred for r in rows]
    return {
        "task": task,
        "value": one_sided.value,
        "ci_low": one_sided.ci_low,
        "ci_high": one_sided.ci_high,
        "n": one_sided.n_valid,
        **_figure("counter", None if None in counter else estimate(counter)),
        **_figure("two_sided", None if None in two_sided else estimate(two_sided)),
        **_figure("no_edit", estimate([r.no_edit_preferred for r in rows])),
    }


def accuracy_entry(task: str, rows: Sequence[PairControlRow], estimate: Estimator) -> dict[str, Any]:
    """The task accuracy of the evaluated (edited) model: the share of pairs whose direct answer, and whose answer
    after the CoT prompt holding the faithful explanation, is the pair's `answer`."""
    return {
        "task": task,
        **_figure("direct", estimate([r.direct_correct for r in rows])),
        **_figure("cot", estimate([r.cot_correct for r in rows])),
    }


def edit_quality_entry(
    task: str, editor: str, rows: Sequence[EditQualityRow], estimate: Estimator, *, excluded: bool
) -> dict[str, Any]:
    """How well the weight editor wrote the task's edits (`editors.quality`): the mean efficacy, generalisation and
    specificity over the pairs, for the edits (M̄) and the counter edits (M̃), and how many pairs' edits failed (some
    rewrite did not become the top completion), which `excluded` says were left out of the metrics and controls."""

    def figure(name: str, values: Sequence[float | None]) -> dict[str, Any]:
        given = [np.nan if v is None else v for v in values]
        return _figure(name, estimate(given) if any(v is not None for v in values) else None)

    return {
        "task": task,
        "editor": editor,
        "n": len(rows),
        "n_failed": sum(not r.succeeded for r in rows),
        "failed_excluded": excluded,
        **figure("efficacy", [r.efficacy for r in rows]),
        **figure("counter_efficacy", [r.counter_efficacy for r in rows]),
        **figure("generalisation", [r.generalisation for r in rows]),
        **figure("counter_generalisation", [r.counter_generalisation for r in rows]),
        **figure("specificity", [r.specificity for r in rows]),
        **figure("counter_specificity", [r.counter_specificity for r in rows]),
    }

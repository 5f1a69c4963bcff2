"""The ReCoE datapoint (paper 003 §3, App. A.2) and the deterministic value changes its counterfactuals are made of."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .domains import Domain, Measure
from .facts import Fact, numeric_fact

MEASURE_FACTORS = (0.6, 0.7, 0.75, 0.8, 1.25, 1.3, 1.4, 1.5)  # a counterfactual value is clearly another value
COUNT_STEPS = (-3, -2, -1, 1, 2, 3)
NUDGE_FACTORS = (0.88, 0.92, 0.95, 1.05, 1.08, 1.12)  # the contrast set's small changes that keep an order
NUDGE_STEPS = (-2, -1, 1, 2)
NUDGE_ATTEMPTS = 20


@dataclass(frozen=True)
class Datapoint:
    """One ReCoE item and its diagnosticity contrast.

    `facts` support `answer`; `counterfactual_facts` (ReCoE's counterfactuals, the evaluated model's edits) support
    `counterfactual_answer`; `contrast_facts` (the contrast model's edits) support the counterfactual answer too,
    through other values. `explanation`/`contrast_explanation` reason from the counterfactual/contrast facts.
    `details` holds what a checker needs to recompute the answers (direction, operands, candidates)."""

    scheme: str
    domain: str
    question: str
    answer: str
    answer_aliases: tuple[str, ...]
    counterfactual_answer: str
    counterfactual_aliases: tuple[str, ...]
    facts: tuple[Fact, ...]
    counterfactual_facts: tuple[Fact, ...]
    contrast_facts: tuple[Fact, ...]
    explanation: str
    contrast_explanation: str
    sources: tuple[str, ...]
    details: Mapping[str, Any] = field(default_factory=dict)


def item_rng(seed: int, *parts: object) -> random.Random:
    """A random stream that depends only on the seed and the named parts (so items do not depend on each other)."""
    return random.Random("|".join(map(str, (seed, "recoe", *parts))))


def altered(value: int, domain: Domain, subject: str, seed: int) -> int:
    """The counterfactual value of one (domain, subject): the same wherever it is altered, so that alterations of
    the same fact never disagree; a measure is scaled, a count moved by a few."""
    rng = item_rng(seed, "alter", domain.name, subject)
    if domain.quantity == "count":
        step = rng.choice(COUNT_STEPS)
        return value + step if value + step >= 0 else value + abs(step)
    new = max(1, round(value * rng.choice(MEASURE_FACTORS)))
    return new if new != value else value + 1


def nudged(
    values: Mapping[str, int], domain: Domain, keep: Callable[[Mapping[str, int]], bool], rng: random.Random
) -> dict[str, int] | None:
    """Other values, each one different, for which `keep` still holds (e.g. the same order); None if no draw
    out of `NUDGE_ATTEMPTS` works."""
    for _ in range(NUDGE_ATTEMPTS):
        if domain.quantity == "count":
            new = {s: v + rng.choice(NUDGE_STEPS) for s, v in values.items()}
        else:
            new = {s: round(v * rng.choice(NUDGE_FACTORS)) for s, v in values.items()}
        if all(new[s] != v and new[s] >= 0 for s, v in values.items()) and keep(new):
            return new
    return None


def facts_of(domain: Domain, subjects: Sequence[str], values: Mapping[str, int]) -> tuple[Fact, ...]:
    """One numeric fact per subject, in the given order."""
    return tuple(numeric_fact(s, domain.prompt, values[s], domain.unit) for s in subjects)


def because(facts: Sequence[Fact], conclusion: str) -> str:
    """A synthetic explanation: the facts it uses, then what follows from them."""
    clauses = [f.clause for f in facts]
    said = clauses[0] if len(clauses) == 1 else f"{', '.join(clauses[:-1])} and {clauses[-1]}"
    return f"{said}, so {conclusion}."


def sources_of(measures: Sequence[Measure]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.source for m in measures))

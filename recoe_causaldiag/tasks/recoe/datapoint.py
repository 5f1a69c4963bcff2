"""The ReCoE datapoint (paper 003 §3, App. A.2), its two edited fact sets, and the value changes they are made of.

Both fact sets of an item are derived from the true facts by one procedure with the same size of change (the same
factor, step or amount on both sides), so neither sits systematically closer to the real world; a changed value is
written to the same precision and with as many characters as the value it replaces, so the two explanations do not
differ in length or in how round their numbers are."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .domains import Domain, Measure
from .facts import Fact, number, numeric_fact

MEASURE_FACTORS = (0.75, 0.8, 0.85, 0.9, 1.1, 1.15, 1.2, 1.25)  # a changed measure is clearly another value
COUNT_STEPS = (-3, -2, -1, 1, 2, 3)
SHIFT_SHARES = (-0.25, -0.2, -0.15, -0.1, 0.1, 0.15, 0.2, 0.25)  # an amount moved, as a share of the smaller value
COARSEST_PRECISION = 1000  # a figure given to the thousand stays given to the thousand (more zeros are not kept)


@dataclass(frozen=True)
class FactSet:
    """The facts of one edited model, the explanation that reasons from them, the subjects or members that differ
    from the true facts, and `departure`: how far its changed values lie from the nearest real-world value of the
    item (log ratio; 0 where it only rearranges or leaves out true facts)."""

    facts: tuple[Fact, ...]
    explanation: str
    changed: tuple[str, ...]
    departure: float = 0.0


@dataclass(frozen=True)
class Datapoint:
    """One ReCoE item and its diagnosticity contrast.

    `facts` support `answer`; `counterfactual` (ReCoE's counterfactual facts, the evaluated model's edits) and
    `contrast` (the contrast model's edits) both support `counterfactual_answer`, through different facts; each
    carries the explanation that reasons from it. `cluster` names the entity that items may share (the subjects'
    group, or the counted set's subject). `details` holds what a checker needs to recompute the answers
    (direction, operands, candidates)."""

    scheme: str
    domain: str
    question: str
    answer: str
    answer_aliases: tuple[str, ...]
    counterfactual_answer: str
    counterfactual_aliases: tuple[str, ...]
    facts: tuple[Fact, ...]
    counterfactual: FactSet
    contrast: FactSet
    sources: tuple[str, ...]
    cluster: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def counterfactual_facts(self) -> tuple[Fact, ...]:
        return self.counterfactual.facts

    @property
    def contrast_facts(self) -> tuple[Fact, ...]:
        return self.contrast.facts

    def swapped(self) -> Datapoint:
        """The same item with the two edited models' roles exchanged."""
        return dataclasses.replace(self, counterfactual=self.contrast, contrast=self.counterfactual)


def item_rng(seed: int, *parts: object) -> random.Random:
    """A random stream that depends only on the seed and the named parts (so items do not depend on each other)."""
    return random.Random("|".join(map(str, (seed, "recoe", *parts))))


def nearer_first(one: FactSet, two: FactSet) -> tuple[FactSet, FactSet]:
    """The two fact sets in a fixed order that does not depend on how they were drawn: the one nearer to the
    real-world values first, and between equally near ones the one with the longer explanation. Which of them the
    evaluated model gets is then balanced over a config, so that neither closeness to the world nor length can
    tell the faithful explanation."""

    def rank(side: FactSet) -> tuple[float, int]:
        return side.departure, -len(side.explanation)

    return (one, two) if rank(one) <= rank(two) else (two, one)


def precision(value: int) -> int:
    """The unit a whole number is stated to: the power of ten of its trailing zeros, at most COARSEST_PRECISION
    (1 for 0 and for a number not ending in 0)."""
    unit = 1
    while value and unit < COARSEST_PRECISION and value % (unit * 10) == 0:
        unit *= 10
    return unit


def stated_like(new: int, old: int) -> bool:
    """Whether `new` is written as `old` is: as many characters and the same precision."""
    return len(number(new)) == len(number(old)) and precision(new) == precision(old)


def rescaled(value: int, factor: float) -> int:
    """`value` times `factor`, rounded to the precision `value` is stated to."""
    unit = precision(value)
    return round(value * factor / unit) * unit


def changes(domain: Domain, rng: random.Random) -> list[float]:
    """The candidate changes of one item in a seeded order: factors for a measure, steps for a count."""
    options = list(COUNT_STEPS if domain.quantity == "count" else MEASURE_FACTORS)
    rng.shuffle(options)
    return options


def admissible(new: int, old: int, domain: Domain) -> bool:
    """Whether `new` may replace the true value `old`: another value of the domain (a count may be 0, a measure
    not), written as `old` is."""
    floor = 0 if domain.quantity == "count" else 1
    return new != old and new >= floor and stated_like(new, old)


def changed_value(value: int, change: float, domain: Domain) -> int | None:
    """`value` scaled by a factor (a measure) or moved by a step (a count); None when the result is not
    admissible."""
    new = value + int(change) if domain.quantity == "count" else rescaled(value, change)
    return new if admissible(new, value, domain) else None


def amounts(low: int, targets: Sequence[int], domain: Domain, rng: random.Random) -> list[int]:
    """Candidate amounts to add to one of `targets`, in a seeded order: a step for a count; for a measure a share
    of `low` (the smaller target), in whole units that keep every target's precision (a multiple of ten times
    the target's unit, or of COARSEST_PRECISION)."""
    if domain.quantity == "count":
        options = list(COUNT_STEPS)
    else:
        unit = max(min(precision(v) * 10, COARSEST_PRECISION) for v in targets)
        options = [round(share * low / unit) * unit for share in SHIFT_SHARES]
        options = [o for o in dict.fromkeys(options) if o != 0]
    rng.shuffle(options)
    return options


def departure(values: Iterable[int], truth: Iterable[int]) -> float:
    """The largest distance, in log ratio, from one of `values` to the nearest of the real-world `truth`."""
    known = [t + 1e-9 for t in truth]
    return max((min(abs(math.log((v + 1e-9) / t)) for t in known) for v in values), default=0.0)


def facts_of(domain: Domain, subjects: Sequence[str], values: Mapping[str, int]) -> tuple[Fact, ...]:
    """One numeric fact per subject, in the given order."""
    return tuple(numeric_fact(s, domain.prompt, values[s], domain.unit, domain.paraphrases) for s in subjects)


def because(facts: Sequence[Fact], conclusion: str) -> str:
    """A synthetic explanation: the facts it uses, then what follows from them."""
    clauses = [f.clause for f in facts]
    said = clauses[0] if len(clauses) == 1 else f"{', '.join(clauses[:-1])} and {clauses[-1]}"
    return f"{said}, so {conclusion}."


def numeric_set(
    domain: Domain, names: Sequence[str], values: Mapping[str, int], truth: Mapping[str, int], conclusion: str
) -> FactSet:
    """The fact set stating `values` for `names`, explained with `conclusion`; its changed subjects and departure
    are measured against the true values `truth`."""
    changed = tuple(n for n in names if values[n] != truth[n])
    facts = facts_of(domain, names, values)
    moved = [values[n] for n in changed if values[n] not in truth.values()]
    return FactSet(facts, because(facts, conclusion), changed, departure(moved, truth.values()))


def sources_of(measures: Sequence[Measure]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(m.source for m in measures))

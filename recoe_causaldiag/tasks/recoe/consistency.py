"""Datapoints consistency (paper 003 App. A.2): within one config, the counterfactual facts of all items must be
editable together, so no two items may give the same fact (subject and relation) different values. The same holds
for the contrast model's facts, so that each of the two edited models is one consistent model per config.
Candidates are taken in a fixed order and an item that contradicts an earlier kept one is dropped (the paper keeps
one at random; here the seeded candidate order decides, so the choice is reproducible)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .datapoint import Datapoint
from .facts import Fact

EVALUATED, CONTRAST = "evaluated", "contrast"


@dataclass(frozen=True)
class Conflict:
    """A dropped item: the fact it would have set to `dropped_value` for the `model` (evaluated or contrast),
    which the kept item sets to `kept_value`."""

    dropped: str
    kept: str
    subject: str
    relation: str
    dropped_value: object
    kept_value: object
    model: str = EVALUATED


Assigned = dict[tuple[str, str], tuple[object, str]]
"""The value each fact (subject, relation) has in the kept items, and the question of the item that set it."""


def conflict_with(question: str, facts: Iterable[Fact], assigned: Assigned, model: str) -> Conflict | None:
    """The first of `facts` that disagrees with the values already assigned, or None."""
    for fact in facts:
        if fact.key in assigned and assigned[fact.key][0] != fact.value:
            value, kept = assigned[fact.key]
            return Conflict(question, kept, fact.subject, fact.prompt, fact.value, value, model)
    return None


def resolve_conflicts(
    candidates: Iterable[Datapoint], limit: int, swaps: Sequence[bool] | None = None
) -> tuple[list[Datapoint], list[Conflict]]:
    """Up to `limit` items, in candidate order, whose counterfactual facts agree with each other and whose contrast
    facts agree with each other; the n-th kept item has its two models' roles exchanged when `swaps[n]` is true
    (decided before its facts are checked). Repeated questions are skipped; the conflicts met on the way are
    returned too."""
    assigned: dict[str, Assigned] = {EVALUATED: {}, CONTRAST: {}}
    kept: list[Datapoint] = []
    conflicts: list[Conflict] = []
    asked: set[str] = set()
    for candidate in candidates:
        if len(kept) == limit:
            break
        if candidate.question in asked:
            continue
        item = candidate.swapped() if swaps is not None and swaps[len(kept)] else candidate
        sides = {EVALUATED: item.counterfactual_facts, CONTRAST: item.contrast_facts}
        conflict = conflict_with(item.question, sides[EVALUATED], assigned[EVALUATED], EVALUATED) or conflict_with(
            item.question, sides[CONTRAST], assigned[CONTRAST], CONTRAST
        )
        if conflict is not None:
            conflicts.append(conflict)
            continue
        for model, facts in sides.items():
            for fact in facts:
                assigned[model][fact.key] = (fact.value, item.question)
        asked.add(item.question)
        kept.append(item)
    return kept, conflicts

"""Datapoints consistency (paper 003 App. A.2): within one config, the counterfactual facts of all items must be
editable together, so no two items may give the same fact (subject and relation) different values. Candidates are
taken in a fixed order and an item that contradicts an earlier kept one is dropped (the paper keeps one at random;
here the seeded candidate order decides, so the choice is reproducible)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .datapoint import Datapoint


@dataclass(frozen=True)
class Conflict:
    """A dropped item: the fact it would have set to `dropped_value`, which the kept item sets to `kept_value`."""

    dropped: str
    kept: str
    subject: str
    relation: str
    dropped_value: object
    kept_value: object


def conflict_with(item: Datapoint, assigned: dict[tuple[str, str], tuple[object, str]]) -> Conflict | None:
    """The first counterfactual fact of `item` that disagrees with the values already assigned, or None."""
    for fact in item.counterfactual_facts:
        if fact.key in assigned and assigned[fact.key][0] != fact.value:
            value, question = assigned[fact.key]
            return Conflict(item.question, question, fact.subject, fact.prompt, fact.value, value)
    return None


def resolve_conflicts(candidates: Iterable[Datapoint], limit: int) -> tuple[list[Datapoint], list[Conflict]]:
    """Up to `limit` items, in candidate order, whose counterfactual facts agree with each other; repeated questions
    are skipped; the conflicts met on the way are returned too."""
    assigned: dict[tuple[str, str], tuple[object, str]] = {}
    kept: list[Datapoint] = []
    conflicts: list[Conflict] = []
    asked: set[str] = set()
    for item in candidates:
        if len(kept) == limit:
            break
        if item.question in asked:
            continue
        conflict = conflict_with(item, assigned)
        if conflict is not None:
            conflicts.append(conflict)
            continue
        for fact in item.counterfactual_facts:
            assigned[fact.key] = (fact.value, item.question)
        asked.add(item.question)
        kept.append(item)
    return kept, conflicts

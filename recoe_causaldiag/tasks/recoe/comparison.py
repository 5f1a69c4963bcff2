"""Group 1 schemes (paper 003 Table 1, §3.2 step 3): superlative, comparative and sorting over the values of a few
subjects of one group. The counterfactual answer comes from swapping the values of the answer's subject and another
subject (subject swap); the two edited models both take that swap and each changes the swapped value of one of the
two subjects by the same factor (or step), keeping the swap's order: same answer, same size of change, different
facts."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .datapoint import Datapoint, changed_value, changes, facts_of, item_rng, nearer_first, numeric_set, sources_of
from .domains import DOMAINS, Domain, Measure
from .facts import listing

SUBSETS_PER_GROUP = 40
SIZES = {"superlative": (3, 4), "comparative": (2,), "sorting": (3, 4)}
ASCENDING, DESCENDING = "from smallest to largest", "from largest to smallest"


def winner(values: Mapping[str, int], direction: str) -> str:
    """The subject with the largest (`max`) or smallest (`min`) value; values are distinct."""
    pick = max if direction == "max" else min
    return pick(values, key=values.__getitem__)


def order(values: Mapping[str, int], direction: str) -> list[str]:
    """The subjects sorted by value, ascending or descending."""
    return sorted(values, key=values.__getitem__, reverse=direction == DESCENDING)


def same_order(new: Mapping[str, int], old: Mapping[str, int]) -> bool:
    """Whether `new` ranks the subjects as `old` does, without ties."""
    return len(set(new.values())) == len(new) and order(new, ASCENDING) == order(old, ASCENDING)


def _or_listing(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def groups(measures: Sequence[Measure]) -> dict[tuple[str, str], list[Measure]]:
    """Measures by (domain, group), most valuable first."""
    out: dict[tuple[str, str], list[Measure]] = {}
    for m in measures:
        out.setdefault((m.domain, m.group), []).append(m)
    return {key: sorted(ms, key=lambda m: (-m.value, m.subject)) for key, ms in sorted(out.items())}


def distinct_subsets(members: Sequence[Measure], size: int, rng: random.Random) -> Iterator[list[Measure]]:
    """Up to SUBSETS_PER_GROUP random draws of `size` members, each a new set of subjects with distinct values."""
    seen: set[frozenset[str]] = set()
    for _ in range(SUBSETS_PER_GROUP):
        subset = rng.sample(list(members), size)
        names = frozenset(m.subject for m in subset)
        if names not in seen and len({m.value for m in subset}) == size:
            seen.add(names)
            yield subset


def swap_and_change(
    domain: Domain, values: Mapping[str, int], pair: Sequence[str], rng: random.Random
) -> tuple[dict[str, int], dict[str, int], dict[str, int]] | None:
    """The subject swap of `pair` (paper 003 §3.2 step 3) and the two edited value sets derived from it: each
    changes the swapped value of one subject of the pair by the same factor (or step), keeping the swap's order,
    so both reach the swap's answer through other values. None when no change keeps the order."""
    first, second = pair
    swapped = {**values, first: values[second], second: values[first]}
    for change in changes(domain, rng):
        one, two = changed_value(swapped[first], change, domain), changed_value(swapped[second], change, domain)
        if one is None or two is None:
            continue
        sets = {**swapped, first: one}, {**swapped, second: two}
        if all(same_order(s, swapped) for s in sets):
            return swapped, *sets
    return None


def _entity_item(
    scheme: str, domain: Domain, group: str, subset: Sequence[Measure], rng: random.Random
) -> Datapoint | None:
    """A superlative or comparative item: which subject has the largest (or smallest) value; the counterfactual
    answer is a rival whose value is swapped with the answer's."""
    direction = rng.choice(("max", "min"))
    names = [m.subject for m in subset]
    rng.shuffle(names)
    values = {m.subject: m.value for m in subset}
    answer = winner(values, direction)
    rival = rng.choice(sorted(n for n in names if n != answer))
    derived = swap_and_change(domain, values, (answer, rival), rng)
    if derived is None:
        return None
    _, one, two = derived
    if scheme == "superlative":
        said = domain.is_most if direction == "max" else domain.is_least
        question = f"Which of these {domain.noun} in {group} {said}: {_or_listing(names)}?"
        conclusion = f"{rival} {said} of them"
    else:
        said = domain.is_more if direction == "max" else domain.is_less
        question = f"Which {said}, {names[0]} or {names[1]}?"
        conclusion = f"{rival} {said}"
    by_name = {m.subject: m for m in subset}
    counterfactual, contrast = nearer_first(
        numeric_set(domain, names, one, values, conclusion), numeric_set(domain, names, two, values, conclusion)
    )
    return Datapoint(
        scheme=scheme,
        domain=domain.name,
        question=question,
        answer=answer,
        answer_aliases=by_name[answer].aliases,
        counterfactual_answer=rival,
        counterfactual_aliases=by_name[rival].aliases,
        facts=facts_of(domain, names, values),
        counterfactual=counterfactual,
        contrast=contrast,
        sources=sources_of(subset),
        cluster=group,
        details={"direction": direction, "candidates": names, "group": group},
    )


def _sorting_item(domain: Domain, group: str, subset: Sequence[Measure], rng: random.Random) -> Datapoint | None:
    """A sorting item: the subjects in order of their values; the counterfactual order swaps two of them."""
    direction = rng.choice((ASCENDING, DESCENDING))
    names = [m.subject for m in subset]
    rng.shuffle(names)
    values = {m.subject: m.value for m in subset}
    derived = swap_and_change(domain, values, rng.sample(names, 2), rng)
    if derived is None:
        return None
    swapped, one, two = derived
    answer, cf_answer = order(values, direction), order(swapped, direction)
    conclusion = f"{direction} they are {', '.join(cf_answer)}"
    counterfactual, contrast = nearer_first(
        numeric_set(domain, names, one, values, conclusion), numeric_set(domain, names, two, values, conclusion)
    )
    return Datapoint(
        scheme="sorting",
        domain=domain.name,
        question=f"Sort these {domain.noun} by {domain.attribute} {direction}: {', '.join(names)}.",
        answer=", ".join(answer),
        answer_aliases=(listing(answer),),
        counterfactual_answer=", ".join(cf_answer),
        counterfactual_aliases=(listing(cf_answer),),
        facts=facts_of(domain, names, values),
        counterfactual=counterfactual,
        contrast=contrast,
        sources=sources_of(subset),
        cluster=group,
        details={"direction": direction, "candidates": names, "group": group},
    )


def round_robin(streams: Sequence[Iterable[Datapoint | None]]) -> Iterator[Datapoint]:
    """One item from each stream in turn until all are exhausted (lazily; None entries are skipped)."""
    active = [iter(s) for s in streams]
    while active:
        still = []
        for stream in active:
            item = next(stream, StopIteration)
            if item is StopIteration:
                continue
            still.append(stream)
            if item is not None:
                yield item
        active = still


def _group_items(
    scheme: str, domain: Domain, group: str, members: Sequence[Measure], seed: int
) -> Iterator[Datapoint | None]:
    for size in SIZES[scheme]:
        if len(members) < size:
            continue
        rng = item_rng(seed, scheme, domain.name, group, size)
        for subset in distinct_subsets(members, size, rng):
            yield (
                _sorting_item(domain, group, subset, rng)
                if scheme == "sorting"
                else _entity_item(scheme, domain, group, subset, rng)
            )


def comparison_candidates(scheme: str, measures: Sequence[Measure], seed: int) -> dict[str, Iterator[Datapoint]]:
    """The candidate items of a Group 1 scheme, by domain, produced lazily: the groups of a domain take turns
    in a seeded order."""
    by_domain: dict[str, list[tuple[str, list[Measure]]]] = {}
    for (domain_name, group), members in groups(measures).items():
        by_domain.setdefault(domain_name, []).append((group, members))
    out = {}
    for domain_name, entries in by_domain.items():
        item_rng(seed, scheme, "order", domain_name).shuffle(entries)
        out[domain_name] = round_robin(
            [_group_items(scheme, DOMAINS[domain_name], group, members, seed) for group, members in entries]
        )
    return out

"""Group 2 schemes (paper 003 Table 1, §3.2 step 3): counting the members of a closed set, and aggregation
(a sum) or subtraction (a difference) of two or three values of one group. The counterfactual alters the facts;
both edited models get such an alteration of the true facts of the same kind and size (one member left out or
added; one value moved by the same amount), on different members or subjects, so they give the same
counterfactual answer through different facts."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from .comparison import distinct_subsets, groups, round_robin
from .datapoint import (
    Datapoint,
    FactSet,
    admissible,
    amounts,
    because,
    facts_of,
    item_rng,
    nearer_first,
    numeric_set,
    sources_of,
)
from .domains import DOMAINS, Collection, Domain, Measure
from .facts import Fact, listing, number, number_aliases, set_fact

AGGREGATION_SIZES = (2, 3)
COUNTING_CHANGES = ("drop", "add")


def _numbers(value: int) -> tuple[str, tuple[str, ...]]:
    """A numeric answer and its other surface forms."""
    return number(value), tuple(a for a in number_aliases(value) if a != number(value))


def alike_pair(names: Sequence[str], rng: random.Random) -> tuple[str, str] | None:
    """Two of `names` written as alike as possible: the same number of words first, then the nearest length in
    characters (a seeded choice among equals); None with fewer than two names."""
    pairs = [(x, y) for i, x in enumerate(names) for y in names[i + 1 :]]
    if not pairs:
        return None
    rng.shuffle(pairs)
    return min(pairs, key=lambda p: (len(p[0].split()) != len(p[1].split()), abs(len(p[0]) - len(p[1]))))


def counting_item(collection: Collection, seed: int) -> Datapoint | None:
    """How many members a subject's set has. Both edited sets change the true set the same way, so they count the
    same: each leaves out one member, or each adds one non-member, a different one on each side (two names
    written as alike as possible). Leaving out or adding is drawn at random; the other is used when the drawn
    one cannot be done."""
    rng = item_rng(seed, "counting", collection.domain, collection.subject)
    members = list(collection.members)
    outsiders = [o for o in collection.outsiders if o not in members]
    ways = list(COUNTING_CHANGES)
    rng.shuffle(ways)
    for way in ways:
        pair = alike_pair(members if way == "drop" else outsiders, rng)
        if pair is not None:
            break
    else:
        return None

    def fact(names: Sequence[str]) -> Fact:
        return set_fact(collection.subject, collection.prompt, names, collection.member_prompt, collection.paraphrases)

    def derived(name: str) -> FactSet:
        names = [m for m in members if m != name] if way == "drop" else [*members, name]
        changed = fact(names)
        return FactSet((changed,), because((changed,), f"the answer is {len(names)}"), (name,))

    counterfactual, contrast = nearer_first(*(derived(name) for name in pair))
    count = len(members) - 1 if way == "drop" else len(members) + 1
    answer, answer_aliases = _numbers(len(members))
    cf_answer, cf_aliases = _numbers(count)
    return Datapoint(
        scheme="counting",
        domain=collection.domain,
        question=collection.question,
        answer=answer,
        answer_aliases=answer_aliases,
        counterfactual_answer=cf_answer,
        counterfactual_aliases=cf_aliases,
        facts=(fact(members),),
        counterfactual=counterfactual,
        contrast=contrast,
        sources=(collection.source,),
        cluster=collection.subject,
        details={"subject": collection.subject, "change": way},
    )


def _new_values(truth: Mapping[str, int], moves: Mapping[str, int], domain: Domain) -> dict[str, int] | None:
    """`truth` with each subject in `moves` moved by its amount; None when a moved value is not admissible or
    equals a true value of the item."""
    new = {**truth, **{s: truth[s] + amount for s, amount in moves.items()}}
    ok = all(admissible(new[s], truth[s], domain) and new[s] not in truth.values() for s in moves)
    return new if ok else None


def _sum(held: Mapping[str, int]) -> int:
    return sum(held.values())


def operation_item(
    scheme: str,
    domain: Domain,
    group: str,
    question: str,
    operands: Sequence[Measure],
    edited: tuple[Mapping[str, int], Mapping[str, int]],
    conclusion: Callable[[Mapping[str, int]], str],
    result: Callable[[Mapping[str, int]], int],
) -> Datapoint:
    """An aggregation or subtraction item over `operands`: the true answer is `result` of their true values, the
    counterfactual answer `result` of either `edited` value set (they agree), and the nearer set to the real world
    comes first (`nearer_first`)."""
    names = [m.subject for m in operands]
    values = {m.subject: m.value for m in operands}
    counterfactual, contrast = nearer_first(
        *(numeric_set(domain, names, held, values, conclusion(held)) for held in edited)
    )
    answer, answer_aliases = _numbers(result(values))
    cf_answer, cf_aliases = _numbers(result(edited[0]))
    return Datapoint(
        scheme=scheme,
        domain=domain.name,
        question=question,
        answer=answer,
        answer_aliases=answer_aliases,
        counterfactual_answer=cf_answer,
        counterfactual_aliases=cf_aliases,
        facts=facts_of(domain, names, values),
        counterfactual=counterfactual,
        contrast=contrast,
        sources=sources_of(operands),
        cluster=group,
        details={"operands": names, "group": group},
    )


def aggregation_item(domain: Domain, group: str, subset: Sequence[Measure], rng: random.Random) -> Datapoint | None:
    """The total of two or three values. Both edited sets move one addend by the same amount, a different addend
    on each side, so they reach the same changed total through different values."""
    names = [m.subject for m in subset]
    values = {m.subject: m.value for m in subset}
    first, second = rng.sample(names, 2)
    low = min(values[first], values[second])
    for amount in amounts(low, (values[first], values[second]), domain, rng):
        one, two = _new_values(values, {first: amount}, domain), _new_values(values, {second: amount}, domain)
        if one is not None and two is not None:
            break
    else:
        return None

    def conclusion(held: Mapping[str, int]) -> str:
        return f"the total is {' + '.join(number(held[n]) for n in names)} = {number(sum(held.values()))}"

    question = (domain.total or "").format(items=listing(names))
    return operation_item("aggregation", domain, group, question, subset, (one, two), conclusion, _sum)


def subtraction_item(domain: Domain, group: str, pair: Sequence[Measure], rng: random.Random) -> Datapoint | None:
    """How much the larger value exceeds the smaller. Both edited sets change the difference by the same amount:
    one moves the larger value by it, the other moves the smaller value by it the other way (the first value
    stays the larger)."""
    high, low = sorted(pair, key=lambda m: -m.value)
    values = {high.subject: high.value, low.subject: low.value}
    for amount in amounts(low.value, (high.value, low.value), domain, rng):
        one = _new_values(values, {high.subject: amount}, domain)
        two = _new_values(values, {low.subject: -amount}, domain)
        if one is not None and two is not None and high.value - low.value + amount > 0:
            break
    else:
        return None

    def conclusion(held: Mapping[str, int]) -> str:
        return (
            f"the difference is {number(held[high.subject])} - {number(held[low.subject])} = "
            f"{number(held[high.subject] - held[low.subject])}"
        )

    def difference(held: Mapping[str, int]) -> int:
        return held[high.subject] - held[low.subject]

    question = (domain.difference or "").format(x=high.subject, y=low.subject)
    return operation_item("subtraction", domain, group, question, (high, low), (one, two), conclusion, difference)


def _group_items(
    scheme: str, domain: Domain, group: str, members: Sequence[Measure], seed: int
) -> Iterator[Datapoint | None]:
    make = aggregation_item if scheme == "aggregation" else subtraction_item
    for size in (s for s in (AGGREGATION_SIZES if scheme == "aggregation" else (2,)) if len(members) >= s):
        rng = item_rng(seed, scheme, domain.name, group, size)
        for subset in distinct_subsets(members, size, rng):
            yield make(domain, group, subset, rng)


def arithmetic_candidates(
    scheme: str, measures: Sequence[Measure], collections: Sequence[Collection], seed: int
) -> dict[str, Iterator[Datapoint]]:
    """The candidate items of a Group 2 scheme, by domain, produced lazily in a seeded order (counting: one per
    collection; aggregation and subtraction: the groups of a domain that has the question take turns)."""
    by_domain: dict[str, list[Iterable[Datapoint | None]]] = {}
    if scheme == "counting":
        for collection in collections:
            by_domain.setdefault(collection.domain, []).append([counting_item(collection, seed)])
    else:
        for (domain_name, group), members in groups(measures).items():
            domain = DOMAINS[domain_name]
            if (domain.total if scheme == "aggregation" else domain.difference) is not None:
                by_domain.setdefault(domain_name, []).append(_group_items(scheme, domain, group, members, seed))
    out = {}
    for domain_name, streams in by_domain.items():
        item_rng(seed, scheme, "order", domain_name).shuffle(streams)
        out[domain_name] = round_robin(streams)
    return out

"""Group 2 schemes (paper 003 Table 1, §3.2 step 3): counting the members of a closed set, and aggregation
(a sum) or subtraction (a difference) of two or three values of one group. The counterfactual alters facts
consistently (an altered value is the same wherever that fact is altered); the contrast set keeps the
counterfactual answer through other members or other values (same count, same total, same difference)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence

from .comparison import distinct_subsets, groups, round_robin
from .datapoint import Datapoint, altered, because, facts_of, item_rng, sources_of
from .domains import DOMAINS, Collection, Domain, Measure
from .facts import listing, number, number_aliases, set_fact

AGGREGATION_SIZES = (2, 3)
SHIFT_SHARES = (0.1, 0.15, 0.2, 0.25)


def _numbers(value: int) -> tuple[str, tuple[str, ...]]:
    """A numeric answer and its other surface forms."""
    return number(value), tuple(a for a in number_aliases(value) if a != number(value))


def counting_item(collection: Collection, seed: int) -> Datapoint | None:
    """How many members a subject's set has; the counterfactual drops or adds one member, the contrast set swaps one
    member of the counterfactual set for a non-member (same count, other members)."""
    rng = item_rng(seed, "counting", collection.domain, collection.subject)
    members = list(collection.members)
    outsiders = [o for o in collection.outsiders if o not in members]
    if len(members) >= 2 and (rng.random() < 0.5 or len(outsiders) < 2):
        dropped = rng.choice(members)
        changed = [m for m in members if m != dropped]
    elif len(outsiders) >= 2:
        changed = members + [rng.choice(outsiders)]
    else:
        return None
    spare = [o for o in outsiders if o not in changed]
    if not spare:
        return None
    contrast = list(changed)
    contrast[rng.randrange(len(contrast))] = rng.choice(spare)

    def fact(names: Sequence[str]):
        return set_fact(collection.subject, collection.prompt, names, collection.member_prompt)

    cf_fact, contrast_fact = fact(changed), fact(contrast)
    answer, answer_aliases = _numbers(len(members))
    cf_answer, cf_aliases = _numbers(len(changed))
    return Datapoint(
        scheme="counting",
        domain=collection.domain,
        question=collection.question,
        answer=answer,
        answer_aliases=answer_aliases,
        counterfactual_answer=cf_answer,
        counterfactual_aliases=cf_aliases,
        facts=(fact(members),),
        counterfactual_facts=(cf_fact,),
        contrast_facts=(contrast_fact,),
        explanation=because((cf_fact,), f"the answer is {len(changed)}"),
        contrast_explanation=because((contrast_fact,), f"the answer is {len(contrast)}"),
        sources=(collection.source,),
        details={"subject": collection.subject},
    )


def _shift(low: int, domain: Domain, rng: random.Random) -> int:
    """A positive amount to move between values, small against the smaller one."""
    if domain.quantity == "count":
        return rng.choice((1, 2))
    return max(1, round(low * rng.choice(SHIFT_SHARES)))


def aggregation_item(
    domain: Domain, group: str, subset: Sequence[Measure], seed: int, rng: random.Random
) -> Datapoint | None:
    """The total of two or three values; the counterfactual alters one of them, the contrast set moves an amount
    from one addend to another (same total)."""
    names = [m.subject for m in subset]
    values = {m.subject: m.value for m in subset}
    target = rng.choice(names)
    changed = {**values, target: altered(values[target], domain, target, seed)}
    give, take = rng.sample(names, 2)
    amount = _shift(min(changed[give], changed[take]), domain, rng)
    if changed[take] - amount < (0 if domain.quantity == "count" else 1):
        return None
    contrast = {**changed, give: changed[give] + amount, take: changed[take] - amount}

    def conclusion(held: dict[str, int]) -> str:
        return f"the total is {' + '.join(number(held[n]) for n in names)} = {number(sum(held.values()))}"

    cf_facts, contrast_facts = facts_of(domain, names, changed), facts_of(domain, names, contrast)
    answer, answer_aliases = _numbers(sum(values.values()))
    cf_answer, cf_aliases = _numbers(sum(changed.values()))
    return Datapoint(
        scheme="aggregation",
        domain=domain.name,
        question=(domain.total or "").format(items=listing(names)),
        answer=answer,
        answer_aliases=answer_aliases,
        counterfactual_answer=cf_answer,
        counterfactual_aliases=cf_aliases,
        facts=facts_of(domain, names, values),
        counterfactual_facts=cf_facts,
        contrast_facts=contrast_facts,
        explanation=because(cf_facts, conclusion(changed)),
        contrast_explanation=because(contrast_facts, conclusion(contrast)),
        sources=sources_of(subset),
        details={"operands": names, "group": group},
    )


def subtraction_item(
    domain: Domain, group: str, pair: Sequence[Measure], seed: int, rng: random.Random
) -> Datapoint | None:
    """How much the larger value exceeds the smaller; the counterfactual alters one of them (the first stays larger),
    the contrast set raises both by the same amount (same difference)."""
    high, low = sorted(pair, key=lambda m: -m.value)
    names = [high.subject, low.subject]
    values = {high.subject: high.value, low.subject: low.value}
    for target in rng.sample(names, 2):
        changed = {**values, target: altered(values[target], domain, target, seed)}
        if changed[high.subject] > changed[low.subject]:
            break
    else:
        return None
    amount = _shift(changed[low.subject], domain, rng)
    contrast = {n: v + amount for n, v in changed.items()}

    def conclusion(held: dict[str, int]) -> str:
        return (
            f"the difference is {number(held[high.subject])} - {number(held[low.subject])} = "
            f"{number(held[high.subject] - held[low.subject])}"
        )

    cf_facts, contrast_facts = facts_of(domain, names, changed), facts_of(domain, names, contrast)
    answer, answer_aliases = _numbers(high.value - low.value)
    cf_answer, cf_aliases = _numbers(changed[high.subject] - changed[low.subject])
    return Datapoint(
        scheme="subtraction",
        domain=domain.name,
        question=(domain.difference or "").format(x=high.subject, y=low.subject),
        answer=answer,
        answer_aliases=answer_aliases,
        counterfactual_answer=cf_answer,
        counterfactual_aliases=cf_aliases,
        facts=facts_of(domain, names, values),
        counterfactual_facts=cf_facts,
        contrast_facts=contrast_facts,
        explanation=because(cf_facts, conclusion(changed)),
        contrast_explanation=because(contrast_facts, conclusion(contrast)),
        sources=sources_of(pair),
        details={"operands": names, "group": group},
    )


def _group_items(
    scheme: str, domain: Domain, group: str, members: Sequence[Measure], seed: int
) -> Iterator[Datapoint | None]:
    make = aggregation_item if scheme == "aggregation" else subtraction_item
    for size in (s for s in (AGGREGATION_SIZES if scheme == "aggregation" else (2,)) if len(members) >= s):
        rng = item_rng(seed, scheme, domain.name, group, size)
        for subset in distinct_subsets(members, size, rng):
            yield make(domain, group, subset, seed, rng)


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

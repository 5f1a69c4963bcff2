"""ReCoE-style reasoning schemes (paper 003): six configs of the `recoe` dataset, each row a ReCoE datapoint
(question, answer with aliases, facts, counterfactual answer with aliases, counterfactual facts, atomic facts and
triplets, in `metadata`) and a causal-diagnosticity pair (SPEC §3).

As a pair, two edited models M̄ and M̃ get two fact sets derived from the true facts by the same kind and size of
change, both giving the same counterfactual answer through different facts; the question offers the
counterfactual and the original answer as options (A)/(B), and both edited models should pick the counterfactual
one. Which of the two sets the evaluated model M̄ gets (its set is ReCoE's counterfactual facts) is a seeded draw,
balanced over each config: the nearer set to the real-world values (or, as near, the longer explanation) goes to M̄
in half of the rows."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from ...api.records import PairRecord, Rewrite, metadata_json, validate_records
from ..answer_letters import balanced_letters, options_in_order
from .arithmetic import arithmetic_candidates
from .comparison import comparison_candidates, round_robin
from .consistency import Conflict, resolve_conflicts
from .datapoint import Datapoint
from .domains import load_measures

RECOE_SCHEMES = ("superlative", "comparative", "sorting", "counting", "aggregation", "subtraction")
ITEMS_PER_SCHEME = 220
CHOICES = ("A", "B")
GROUP_1 = ("superlative", "comparative", "sorting")


def interleave(by_domain: Mapping[str, Iterator[Datapoint]]) -> Iterator[Datapoint]:
    """Candidates taken one domain at a time in turn (domains in name order), so no domain crowds out the others."""
    return round_robin([by_domain[d] for d in sorted(by_domain)])


def make_pair(index: int, item: Datapoint, letter: str) -> PairRecord:
    """One `recoe/<scheme>` row; the counterfactual answer is option `letter`, the original answer the other."""
    options = options_in_order(item.counterfactual_answer, item.answer, letter)
    true_objects = {f.key: f.object for f in item.facts}

    def rewrites(facts) -> tuple[Rewrite, ...]:
        return tuple(Rewrite(f.prompt, f.subject, f.object, true_objects[f.key], f.paraphrases) for f in facts)

    source = "; ".join(item.sources)
    return PairRecord(
        id=f"recoe-{item.scheme}-{index}",
        task=f"recoe/{item.scheme}",
        question=f"{item.question} (A) {options[0]} (B) {options[1]}. Answer?",
        choices=CHOICES,
        answer=letter,
        edits=tuple(f.sentence for f in item.counterfactual_facts),
        counter_edits=tuple(f.sentence for f in item.contrast_facts),
        explanation_faithful=item.counterfactual.explanation,
        explanation_unfaithful=item.contrast.explanation,
        rewrites=rewrites(item.counterfactual_facts),
        counter_rewrites=rewrites(item.contrast_facts),
        metadata=metadata_json(
            scheme=item.scheme,
            domain=item.domain,
            cluster=item.cluster,
            recoe_question=item.question,
            answer=item.answer,
            answer_aliases=list(item.answer_aliases),
            counterfactual_answer=item.counterfactual_answer,
            counterfactual_answer_aliases=list(item.counterfactual_aliases),
            facts=[f.as_metadata(source) for f in item.facts],
            counterfactual_facts=[f.as_metadata(source) for f in item.counterfactual_facts],
            contrast_facts=[f.as_metadata(source) for f in item.contrast_facts],
            changed=list(item.counterfactual.changed),
            contrast_changed=list(item.contrast.changed),
            options=list(options),
            answer_position=letter,
            sources=list(item.sources),
            **item.details,
        ),
    )


def scheme_items(
    scheme: str,
    seed: int,
    *,
    curated_dir: Path | None = None,
    limit: int = ITEMS_PER_SCHEME,
    loaded: tuple | None = None,
) -> tuple[list[Datapoint], list[Conflict]]:
    """The consistent items of one scheme and the conflicts resolved on the way. The evaluated model gets the
    nearer fact set of a candidate (see `nearer_first`) in the rows of a seeded, balanced half of the positions, the
    other set in the others."""
    measures, collections = loaded or load_measures(curated_dir)
    by_domain = (
        comparison_candidates(scheme, measures, seed)
        if scheme in GROUP_1
        else arithmetic_candidates(scheme, measures, collections, seed)
    )
    swaps = [letter == "B" for letter in balanced_letters(limit, f"{seed}|recoe|{scheme}|roles", odd_extra="A")]
    items, conflicts = resolve_conflicts(interleave(by_domain), limit, swaps)
    if len(items) < limit:
        raise ValueError(f"recoe/{scheme}: only {len(items)} consistent items for the {limit} asked")
    return items, conflicts


def build_recoe(
    seed: int = 0, *, curated_dir: Path | None = None, limit: int = ITEMS_PER_SCHEME
) -> dict[str, list[PairRecord]]:
    """The six configs, `limit` rows each; in each, half the rows (rounded up) put the counterfactual answer at A."""
    loaded = load_measures(curated_dir)
    configs = {}
    for scheme in RECOE_SCHEMES:
        items, _ = scheme_items(scheme, seed, limit=limit, loaded=loaded)
        letters = balanced_letters(len(items), f"{seed}|recoe|{scheme}|letters", odd_extra="A")
        configs[scheme] = validate_records(
            make_pair(i, item, letter) for i, (item, letter) in enumerate(zip(items, letters))
        )
    return configs


__all__ = ["CHOICES", "ITEMS_PER_SCHEME", "build_recoe", "make_pair", "scheme_items"]

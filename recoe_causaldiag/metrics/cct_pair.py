"""CCT per pair (new): the Correlational Explanatory Faithfulness of paper 004 (eq. 1) computed across K
interventions within ONE instance, so that the CCT can be put under causal diagnosticity.

Interventions on one instance (the same for both explanations of a pair; seeded by question and edits):
- one per edit fact (at most `max_facts`, a seeded sample when there are more): the fact is dropped from the
  ICE edits; it is mentioned when the explanation restates what the fact adds to the question. With "new"
  the fact's content words that the question lacks: at least half of its new numbers if it has any
  ("0.75" in "The density of a raw pear is about 0.75 g/cm^3."); else more than half of its new words
  ("sport", "tennis" for "Babe Ruth professionally plays the sport tennis." asked "Does Babe Ruth
  professionally play baseball?": "tennis" and "sport" are needed, "sport" alone is not); else, when the
  question holds all its content words ("Ferrari is media company."), all of them;
- one per input slot (at most `max_insertions` nouns/verbs of the question, paper 004 §4.3): a random
  adjective/adverb is inserted; it is mentioned when the explanation mentions the inserted word or its lemma.

impact = TVD between the evaluated model's label distributions (direct prompt under the edits) before and
after; mention ∈ {0, 1} is judged on the GIVEN explanation (it is not regenerated).
Variants: `pointbiserial` (eq. 1/3, Pearson on binary mentions) and `spearman` (App. F). NaN when all
mentions are equal or the impacts have no variance (e.g. an explanation that mentions none of the facts).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..api import Engine, Instance, Metric, register_metric
from ..dataset_metrics.cct import point_biserial, spearman, tvd
from ..mechanisms.interventions import mentioned_count, random_insertions, seed_for, text_forms, word_forms
from ..mechanisms.prompting import label_request
from ..mechanisms.words import INTERVENTION_FUNCTION_WORDS, JOINED_WORD, NUMBER, content_words
from ..references import SIEGEL_2024


@dataclass(frozen=True)
class Intervention:
    """The instance's edits and question after one intervention; an explanation mentions the intervened
    content when it mentions at least `needed` of the `keys`."""

    kind: str
    edits: tuple[str, ...]
    question: str
    keys: tuple[str, ...]
    needed: int

    def mentioned_by(self, explanation: str) -> bool:
        return bool(self.keys) and mentioned_count(self.keys, explanation) >= self.needed


def fact_keys(fact: str, question: str) -> tuple[tuple[str, ...], int]:
    """The key words of an edit fact and how many of them a mention needs (see the module docstring)."""
    asked = text_forms(question)
    words = tuple(dict.fromkeys(content_words(fact, INTERVENTION_FUNCTION_WORDS, pattern=JOINED_WORD, min_length=2)))
    new = tuple(w for w in words if not word_forms(w) & asked)
    numbers = tuple(w for w in new if NUMBER.fullmatch(w))
    if numbers:
        return numbers, (len(numbers) + 1) // 2
    if new:
        return new, len(new) // 2 + 1
    return words, len(words)


def interventions(instance: Instance, max_facts: int, max_insertions: int, seed: int) -> list[Intervention]:
    """Fact removals (edits order), then insertions into the question, for one instance."""
    edits, question = tuple(instance.edits), instance.question
    rng_seed = seed_for(seed, question, *edits)
    keep = sorted(random.Random(rng_seed).sample(range(len(edits)), min(max_facts, len(edits))))
    plan = [Intervention("fact", edits[:i] + edits[i + 1 :], question, *fact_keys(edits[i], question)) for i in keep]
    plan += [
        Intervention("insertion", edits, ins.text, (ins.word,), 1)
        for ins in random_insertions(question, max_insertions, rng_seed)
    ]
    return [p for p in plan if p.keys]


@register_metric
class CCTPair(Metric):
    name = "cct_pair"
    explanation_type = "post-hoc"
    description = (
        "correlation, across interventions within one instance (dropped edit facts, inserted words), "
        "between prediction impact (TVD) and whether the explanation mentions the intervened content"
    )
    title = "CCT per Pair"
    long_description = (
        "CCT per pair: the Correlational Explanatory Faithfulness of Siegel et al. (2024) computed "
        "across a few interventions within one input (each edit fact dropped; a random "
        "adjective/adverb inserted into the question): the correlation between the prediction impact "
        "(TVD of the label distribution) and whether the given explanation mentions the intervened "
        "content. Variants: pointbiserial (default), spearman. NaN when all mentions are equal."
    )
    citation = SIEGEL_2024
    evaluate_options = ("max_facts", "max_insertions", "seed")
    options_doc = """
    max_facts (int, optional): edit facts dropped, one intervention each (a seeded sample if more). Default: 4.
    max_insertions (int, optional): adjectives/adverbs inserted into the question, one intervention each. Default: 2.
    seed (int, optional): seed of the fact sample and the inserted words. Default: 0.
"""

    def __init__(self, max_facts: int = 4, max_insertions: int = 2, seed: int = 0) -> None:
        if max_facts < 0 or max_insertions < 0 or max_facts + max_insertions < 2:
            raise ValueError(
                f"need max_facts, max_insertions >= 0 and at least two interventions, got {max_facts}, {max_insertions}"
            )
        self.max_facts, self.max_insertions, self.seed = max_facts, max_insertions, seed

    @property
    def variants(self) -> tuple[str, ...]:
        return ("pointbiserial", "spearman")

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        plans = [interventions(i, self.max_facts, self.max_insertions, self.seed) for i in instances]
        requests = [label_request(i) for i in instances]
        requests += [
            label_request(i, edits=v.edits, question=v.question) for i, plan in zip(instances, plans) for v in plan
        ]
        probs = engine.label_probs(requests, desc=self.name)
        scores = {v: np.full(len(instances), np.nan) for v in self.variants}
        offset = len(instances)
        for index, (instance, plan) in enumerate(zip(instances, plans)):
            impacts = [tvd(probs[index], p) for p in probs[offset : offset + len(plan)]]
            mentions = [float(v.mentioned_by(instance.explanation)) for v in plan]
            offset += len(plan)
            scores["pointbiserial"][index] = point_biserial(impacts, mentions)
            scores["spearman"][index] = spearman(impacts, mentions)
        return scores

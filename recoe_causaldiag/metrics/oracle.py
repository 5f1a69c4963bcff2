"""The oracle sanity reference (not a faithfulness metric): it reads the evaluated model's edits and scores how
much of them an explanation states and how many it contradicts, so its diagnosticity should be near 1 on every task;
below that, the data or the pipeline is wrong. It calls no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..api import Engine, Instance, Metric, register_metric
from ..citation import PAPER_BIBTEX
from ..mechanisms.words import PLAIN_WORD, STATEMENT_STOP_WORDS, content_words

VERBS = frozenset(
    "is are was were be been being am has have had do does did can could will would shall should may might must".split()
)
"""Words that make a text segment a clause; a segment without one (a list item) joins the next segment."""

_SEGMENT = re.compile(r"[,;:!?]|\.(?!\d)")

Gram = tuple[str, ...]


def statement_words(text: str) -> list[str]:
    """Lower-cased words and numbers of `text` in order, without function words unless part of a name."""
    return content_words(text, STATEMENT_STOP_WORDS, pattern=PLAIN_WORD, keep_capitalised=True)


def grams(words: Sequence[str]) -> set[Gram]:
    """Unigrams and bigrams of a word sequence."""
    return {(w,) for w in words} | set(zip(words, words[1:]))


def clauses(text: str) -> list[set[str]]:
    """Content-word sets of the clauses of `text`: segments split at punctuation, each verbless segment (a list
    item such as "A" in "A, B are X") merged into the next one, so that "A, B are X" states "A is X"."""
    merged: list[set[str]] = []
    pending: set[str] = set()
    for segment in _SEGMENT.split(text):
        pending |= set(statement_words(segment))
        if VERBS & {w.lower() for w in PLAIN_WORD.findall(segment)}:
            merged.append(pending)
            pending = set()
    return merged + [pending] if pending else merged


def edit_overlap(edits: Sequence[str], explanation: str) -> float:
    """(facts stated + word share) / (facts + 1), NaN when the edits have no content words.

    A fact is stated when all its content words occur in one clause of the explanation; the word share is the
    fraction of the edits' content unigrams and bigrams (within a fact) that occur in the explanation, and
    credits partly stated facts without outweighing one fully stated fact."""
    facts = [words for words in map(statement_words, edits) if words]
    if not facts:
        return float("nan")
    spans = clauses(explanation)
    stated = sum(any(set(words) <= span for span in spans) for words in facts)
    target = set().union(*map(grams, facts))
    share = len(target & grams(statement_words(explanation))) / len(target)
    return (stated + share) / (len(facts) + 1)


def subject_and_object(fact: str) -> tuple[set[str], set[str]] | None:
    """The words of a fact before its last verb (what it is about: subject and relation) and after it (what it
    says: the object); None when it has no verb or either side has no content word."""
    tokens = PLAIN_WORD.findall(fact)
    verbs = [i for i, token in enumerate(tokens) if token.lower() in VERBS]
    if not verbs:
        return None
    about = set(statement_words(" ".join(tokens[: verbs[-1]])))
    says = set(statement_words(" ".join(tokens[verbs[-1] + 1 :])))
    return (about, says) if about and says else None


def contradicted_facts(edits: Sequence[str], explanation: str) -> int:
    """How many edit facts the explanation contradicts: one of its clauses holds everything a fact is about and none
    of what it says (it says something else about the same subject and relation)."""
    spans = clauses(explanation)
    split = [parts for parts in map(subject_and_object, edits) if parts is not None]
    return sum(any(about <= span and not says & span for span in spans) for about, says in split)


def oracle_score(edits: Sequence[str], explanation: str) -> float:
    """`edit_overlap` minus one per contradicted edit fact: an explanation that contradicts the edits scores below
    every explanation that does not, whatever else it repeats."""
    return edit_overlap(edits, explanation) - contradicted_facts(edits, explanation)


@register_metric
class Oracle(Metric):
    """How much of the evaluated model's edits the explanation states: a reference that knows the answer key."""

    name = "oracle"
    explanation_type = "reference"
    description = (
        "sanity reference: share of the evaluated model's edit facts and words stated in the explanation, minus the "
        "facts it contradicts"
    )
    title = "Oracle (sanity reference)"
    long_description = (
        "Oracle (a sanity reference, not a faithfulness metric): how much of the evaluated model's "
        "edits the explanation states, (facts stated in full within one clause + share of the edits' "
        "content words and bigrams found) / (facts + 1), minus one for every edit fact that a clause "
        "contradicts (it holds the fact's subject and relation but none of its object). It reads the "
        "edits, so its causal diagnosticity should be near 1. `model` is ignored."
    )
    citation = PAPER_BIBTEX
    uses_model = False

    @property
    def variants(self) -> tuple[str, ...]:
        return ("overlap",)

    def score_instances(self, instances: Sequence[Instance], engine: Engine | None = None) -> dict[str, np.ndarray]:
        return {"overlap": np.array([oracle_score(i.edits, i.explanation) for i in instances], dtype=float)}

"""The oracle sanity reference (not a faithfulness metric): it reads the evaluated model's edits and scores how
much of them an explanation states, so its diagnosticity should be near 1 on every task; below that, the data or the
pipeline is wrong. It calls no model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ..api import Engine, Instance, Metric, register_metric

STOP_WORDS = frozenset("""
a an the and or but nor so yet as if then than that this these those there here it its
is are was were be been being am do does did has have had having will would can could shall should may might must
of in on at to for from by with about into onto over under between among through during before after
not no only own same too very just also both each few more most other some such any all
who whom whose which what when where why how i me my we our you your he him his she her they them their one least
""".split())
"""Function words, dropped unless written capitalised after the first word (as in the band name "The Who")."""

VERBS = frozenset("is are was were be been being am has have had do does did can could will would shall should may "
                  "might must".split())
"""Words that make a text segment a clause; a segment without one (a list item) joins the next segment."""

_WORD = re.compile(r"\d+(?:\.\d+)?|[^\W\d_]+")
_SEGMENT = re.compile(r"[,;:!?]|\.(?!\d)")

Gram = tuple[str, ...]


def content_words(text: str) -> list[str]:
    """Lower-cased words and numbers of `text` in order, without function words (tokenizer-free split)."""
    words = _WORD.findall(text)
    return [w.lower() for i, w in enumerate(words)
            if w.lower() not in STOP_WORDS or (i > 0 and w[0].isupper())]


def grams(words: Sequence[str]) -> set[Gram]:
    """Unigrams and bigrams of a word sequence."""
    return {(w,) for w in words} | set(zip(words, words[1:]))


def clauses(text: str) -> list[set[str]]:
    """Content-word sets of the clauses of `text`: segments split at punctuation, each verbless segment (a list
    item such as "A" in "A, B are X") merged into the next one, so that "A, B are X" states "A is X"."""
    merged: list[set[str]] = []
    pending: set[str] = set()
    for segment in _SEGMENT.split(text):
        pending |= set(content_words(segment))
        if VERBS & {w.lower() for w in _WORD.findall(segment)}:
            merged.append(pending)
            pending = set()
    return merged + [pending] if pending else merged


def edit_overlap(edits: Sequence[str], explanation: str) -> float:
    """(facts stated + word share) / (facts + 1), NaN when the edits have no content words.

    A fact is stated when all its content words occur in one clause of the explanation; the word share is the
    fraction of the edits' content unigrams and bigrams (within a fact) that occur in the explanation, and
    credits partly stated facts without outweighing one fully stated fact."""
    facts = [words for words in map(content_words, edits) if words]
    if not facts:
        return float("nan")
    spans = clauses(explanation)
    stated = sum(any(set(words) <= span for span in spans) for words in facts)
    target = set().union(*map(grams, facts))
    share = len(target & grams(content_words(explanation))) / len(target)
    return (stated + share) / (len(facts) + 1)


@register_metric
class Oracle(Metric):
    """How much of the evaluated model's edits the explanation states: a reference that knows the answer key."""

    name = "oracle"
    kind = "reference"
    description = "sanity reference: share of the evaluated model's edit facts and words stated in the explanation"

    @property
    def variants(self) -> tuple[str, ...]:
        return ("overlap",)

    def score_instances(self, instances: Sequence[Instance], engine: Engine | None = None
                        ) -> dict[str, np.ndarray]:
        return {"overlap": np.array([edit_overlap(i.edits, i.explanation) for i in instances], dtype=float)}

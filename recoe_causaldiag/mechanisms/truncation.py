"""Truncations of an explanation for Early Answering (paper 000 App. D.2).

Part-of-speech decisions use lemminflect's offline lexicon (a word is a verb when the lexicon
knows a VERB/AUX lemma for it and the form is inflected or never a noun; capitalised words are
proper nouns), and a fixed list of stative verbs (Quirk et al., 1985, §4.29 classes).
"""

from __future__ import annotations

import re
from functools import lru_cache

from lemminflect import getAllLemmas

from .words import DETERMINERS_AND_PRONOUNS

STATIVE_VERBS = frozenset(
    {
        "be",
        "have",
        "own",
        "possess",
        "belong",
        "contain",
        "consist",
        "include",
        "comprise",
        "involve",
        "lack",
        "seem",
        "appear",
        "resemble",
        "equal",
        "exist",
        "remain",
        "lie",
        "stand",
        "depend",
        "matter",
        "mean",
        "know",
        "believe",
        "think",
        "understand",
        "recognize",
        "remember",
        "doubt",
        "suppose",
        "realize",
        "like",
        "love",
        "hate",
        "prefer",
        "want",
        "need",
        "wish",
        "deserve",
        "weigh",
        "cost",
        "measure",
        "fit",
        "sound",
        "smell",
        "taste",
        "feel",
        "look",
        "hold",
        "concern",
        "locate",
    }
)
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\b[A-Z]\.)\s+(?=\S)")  # an initial such as "P. G." ends no sentence
_CLAUSE = re.compile(r",\s*(?:while|whereas|so|as|since)\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_][\w'-]*|\d+(?:[.,]\d+)*")


def first_third(explanation: str) -> str:
    """The original metric: the first third of the explanation's characters."""
    return explanation[: len(explanation) // 3].rstrip()


@lru_cache(maxsize=4096)
def _lemmas(word: str) -> dict[str, tuple[str, ...]]:
    return getAllLemmas(word.lower())


def _verb_lemma(word: str) -> str | None:
    if word[0].isupper() and word.lower() not in {"is", "are", "was", "were", "has", "have", "had"}:
        return None
    lemmas = _lemmas(word)
    verbal = lemmas.get("AUX") or lemmas.get("VERB")
    if not verbal:
        return None
    inflected = word.lower() not in verbal
    return verbal[0] if inflected or "NOUN" not in lemmas else None


def _is_noun(word: str) -> bool:
    """Nouns by the lexicon, numbers and capitalised words (proper nouns); never a determiner or pronoun."""
    if word.lower() in DETERMINERS_AND_PRONOUNS:
        return False
    return word[0].isupper() or word[0].isdigit() or bool({"NOUN", "PROPN"} & _lemmas(word).keys())


def _through_first_verb(explanation: str) -> str | None:
    """Rule 3: an action verb keeps the text through the verb; a stative verb keeps it through the first noun
    (before the verb, as in the authors' code), or through the verb when no noun precedes it."""
    first_noun = None
    for match in _WORD.finditer(explanation):
        lemma = _verb_lemma(match.group())
        if lemma is None:
            if first_noun is None and _is_noun(match.group()):
                first_noun = match
            continue
        if lemma in STATIVE_VERBS and first_noun is not None:
            return explanation[: first_noun.end()]
        return explanation[: match.end()]
    return None


def heuristic_truncation(explanation: str) -> str:
    """The ordered heuristics of App. D.2; the first rule that applies decides."""
    sentences = _SENTENCE_END.split(explanation.strip())
    if len(sentences) > 3:
        return sentences[0]
    clause = _CLAUSE.search(explanation)
    if clause:
        return explanation[: clause.start()]
    through_verb = _through_first_verb(explanation)
    if through_verb:
        return through_verb
    marks = [explanation.index(mark) for mark in (",", ";") if mark in explanation]
    return explanation[: min(marks)] if marks else first_third(explanation)

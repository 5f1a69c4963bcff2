"""Random word insertions (paper 004 §4.3; Atanasova et al., 2023) and explanation mentions, offline.

An interventional addition (IA) inserts a random adjective before a noun or a random adverb before a verb
of the input. The papers tag with spaCy and sample from WordNet; offline, the candidate words are the curated
`builders/sources/cct_words.csv` and nouns/verbs are found with lemminflect's lexicon (`getAllLemmas`, which
lists every UPOS a word form can have) and this heuristic:

- only lower-case alphabetic words of 3+ letters that are not function words or auxiliaries (capitalised
  words are names or sentence starts, and inserting inside "Central African Republic" would break a name);
- a word that can only be a NOUN is a noun slot, one that can only be a VERB a verb slot;
- a word that can be both is a noun after a determiner, preposition, possessive or number, a verb after a
  pronoun, modal, "to", negation, pure adverb or pure noun (the subject), and skipped otherwise (also
  after punctuation);
- a noun right after a content word that can be a noun or adjective but not a verb is inside a noun
  phrase ("media company", "political ideology") and is skipped: the adjective goes before the phrase.

Mentions (paper 004: case-insensitive match of the word or its stem) are matched per token: a word is
mentioned when some token of the text shares a form with it, forms being the lower-cased word and its
lemminflect lemmas (so "plays" mentions "play", and "art" is not found inside "party"). Tokens are runs of
letters and digits joined by . - / ^ (so "0.75", "1945-46" and "g/cm^3" stay whole).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from lemminflect import getAllLemmas

from ..curated_sources import read_curated_csv, source_path
from .words import INTERVENTION_FUNCTION_WORDS, JOINED_WORD

WORDS_FILE = "cct_words.csv"
INSERTED_POS = {"NOUN": "ADJ", "VERB": "ADV"}

NOUN_CUES = frozenset(
    """a an the this that these those my your his her its our their whose some any each every
no of in on at by for with from into about between among during over under two three four five six seven eight
nine ten""".split()
)
VERB_CUES = frozenset(
    """i you he she it we they who to not never will would shall should can could may might must
do does did""".split()
)


@dataclass(frozen=True)
class Slot:
    """A place for an insertion: before the word at character `start`, tagged NOUN or VERB."""

    start: int
    word: str
    pos: str


@dataclass(frozen=True)
class Insertion:
    """The input after inserting `word` (an adjective before a noun, an adverb before a verb) at `slot`."""

    text: str
    word: str
    slot: Slot


@cache
def candidate_words() -> dict[str, tuple[str, ...]]:
    """The curated candidates by UPOS: {"ADJ": adjectives, "ADV": adverbs}."""
    words: dict[str, list[str]] = {"ADJ": [], "ADV": []}
    for row in read_curated_csv(source_path(WORDS_FILE), ("word", "pos")):
        if row.values["pos"] not in words:
            raise row.error(f"pos must be ADJ or ADV, got {row.values['pos']!r}")
        words[row.values["pos"]].append(row.values["word"])
    return {pos: tuple(values) for pos, values in words.items()}


def _tags(word: str) -> set[str]:
    return set(getAllLemmas(word))


def _slot_pos(word: str, previous: str | None) -> str | None:
    """NOUN, VERB or None for a word given the previous word (None after punctuation or at the start)."""
    if len(word) < 3 or not word.isalpha() or not word.islower() or word in INTERVENTION_FUNCTION_WORDS:
        return None
    tags = _tags(word)
    noun, verb = "NOUN" in tags, "VERB" in tags
    if "AUX" in tags or not (noun or verb):
        return None
    before = _tags(previous) if previous and previous not in INTERVENTION_FUNCTION_WORDS else set()
    if noun and not verb:
        return None if before & {"NOUN", "ADJ"} and "VERB" not in before else "NOUN"
    if verb and not noun:
        return "VERB"
    if previous is None:
        return None
    if previous in NOUN_CUES or previous.isdigit():
        return "NOUN"
    if previous in VERB_CUES or before in ({"ADV"}, {"NOUN"}):
        return "VERB"
    return None


def slots(text: str) -> tuple[Slot, ...]:
    """Every noun and verb of `text` before which a word can be inserted, in order."""
    found, previous, end = [], None, 0
    for match in JOINED_WORD.finditer(text):
        adjacent = previous is not None and not text[end : match.start()].strip()
        pos = _slot_pos(match.group(), previous.lower() if adjacent and previous else None)
        if pos:
            found.append(Slot(match.start(), match.group(), pos))
        previous, end = match.group(), match.end()
    return tuple(found)


def insert(text: str, slot: Slot, word: str) -> Insertion:
    """`text` with `word` and a space inserted before the slot's word."""
    return Insertion(f"{text[: slot.start]}{word} {text[slot.start :]}", word, slot)


def random_insertions(text: str, k: int, seed: int) -> list[Insertion]:
    """k seeded random insertions: slots in random order (cycling when k exceeds them), a random candidate of
    the slot's part of speech each, never the same word twice at one slot; [] when the text has no slot."""
    rng = random.Random(seed)
    found = list(slots(text))
    order = rng.sample(found, len(found))
    used: set[tuple[int, str]] = set()
    result = []
    for index in range(k if order else 0):
        slot = order[index % len(order)]
        pool = [w for w in candidate_words()[INSERTED_POS[slot.pos]] if (slot.start, w) not in used]
        if not pool:
            break
        word = rng.choice(pool)
        used.add((slot.start, word))
        result.append(insert(text, slot, word))
    return result


def seed_for(seed: int, *texts: str) -> int:
    """A seed that depends only on `seed` and the texts (stable across processes, unlike `hash`)."""
    digest = hashlib.sha256("\x1f".join((str(seed), *texts)).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def tokens(text: str) -> list[str]:
    """The word tokens of `text` (see the module docstring)."""
    return JOINED_WORD.findall(text)


@cache
def word_forms(word: str) -> frozenset[str]:
    """The lower-cased word and its lemmas under every part of speech."""
    lower = word.lower()
    return frozenset({lower, *(lemma.lower() for lemmas in getAllLemmas(lower).values() for lemma in lemmas)})


def text_forms(text: str) -> frozenset[str]:
    """Every form of every token of `text`."""
    return frozenset(form for token in tokens(text) for form in word_forms(token))


def mentioned_count(words: Iterable[str], text: str) -> int:
    """How many of `words` the text mentions (word or lemma, case-insensitive, per token)."""
    forms = text_forms(text)
    return sum(1 for word in words if word_forms(word) & forms)


def mentions_all(words: Sequence[str], text: str) -> bool:
    """Whether `text` mentions every one of `words`."""
    return mentioned_count(words, text) == len(words)

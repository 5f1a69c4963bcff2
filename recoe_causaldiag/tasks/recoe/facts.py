"""ReCoE facts (paper 003 §3.2–3.3, App. A.2): a fact sentence is a relation prompt with its subject plus an object,
so that it doubles as a MEMIT/ROME rewrite; it breaks down into atomic sentences and (s; r; o) triplets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

NUMBER_WORDS = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
)


def number(value: int) -> str:
    """A number as the dataset writes it (thousands separated by commas)."""
    return f"{value:,}"


def number_aliases(value: int) -> tuple[str, ...]:
    """The ways an answer may state a number: with and without separators, and in words up to twenty."""
    forms = [number(value), str(value)]
    if 0 <= value < len(NUMBER_WORDS):
        forms.append(NUMBER_WORDS[value])
    return tuple(dict.fromkeys(forms))


def listing(names: Sequence[str]) -> str:
    """`A`, `A and B`, `A, B and C`."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


@dataclass(frozen=True)
class Atom:
    """One atomic fact: its sentence and its (subject; relation; object) triplet."""

    sentence: str
    triplet: tuple[str, str, str]


@dataclass(frozen=True)
class Fact:
    """A fact sentence `prompt.format(subject) + " " + object + "."` whose value is a number or a set of members.

    `key` names what the fact is about (subject and relation): two facts with the same key and different values
    contradict each other."""

    subject: str
    prompt: str
    object: str
    value: int | tuple[str, ...]
    atoms: tuple[Atom, ...]
    paraphrases: tuple[str, ...] = ()
    """Other wordings of `prompt` (a weight edit's generalisation prompts)."""

    @property
    def sentence(self) -> str:
        return f"{self.prompt.format(self.subject)} {self.object}."

    @property
    def key(self) -> tuple[str, str]:
        return (self.subject, self.prompt)

    @property
    def clause(self) -> str:
        """The sentence without its final period, to be joined into an explanation."""
        return self.sentence[:-1]

    def as_metadata(self, source: str) -> dict[str, Any]:
        """The ReCoE form of a fact (App. A.2: sentence, atomic sentences, atomic triplets) plus its source."""
        return {
            "sentence": self.sentence,
            "atomic_sentences": [a.sentence for a in self.atoms],
            "atomic_triplets": [list(a.triplet) for a in self.atoms],
            "source": source,
        }


def numeric_fact(subject: str, prompt: str, value: int, unit: str, paraphrases: tuple[str, ...] = ()) -> Fact:
    """A fact stating one number (`Mount Everest has a height of 8,849 metres.`); it is its own atomic fact."""
    obj = f"{number(value)}{unit}"
    sentence = f"{prompt.format(subject)} {obj}."
    atom = Atom(sentence, (subject, prompt.replace("{}", "").strip(), obj))
    return Fact(subject, prompt, obj, value, (atom,), paraphrases)


def set_fact(
    subject: str, prompt: str, members: Sequence[str], member_prompt: str, paraphrases: tuple[str, ...] = ()
) -> Fact:
    """A fact listing a closed set (`Germany shares a land border with Austria, ... and Switzerland.`); every member
    is one atomic fact stated with `member_prompt` (`{} shares a land border with`)."""
    relation = member_prompt.replace("{}", "").strip()
    atoms = tuple(Atom(f"{member_prompt.format(subject)} {m}.", (subject, relation, m)) for m in members)
    return Fact(subject, prompt, listing(list(members)), tuple(members), atoms, paraphrases)

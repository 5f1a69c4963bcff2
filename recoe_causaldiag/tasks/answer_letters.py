"""Which of two options is the answer: the (A)/(B) order of one question, and a dataset's answer letters, half A
and half B in a seeded order (so that a model that always picks one letter scores at chance)."""

from __future__ import annotations

import random
from typing import Literal, TypeVar

Option = TypeVar("Option")


def balanced_letters(count: int, seed_key: str, *, odd_extra: Literal["A", "B"]) -> list[str]:
    """`count` answer letters, half "A" and half "B", shuffled by `random.Random(seed_key)`; for an odd count,
    `odd_extra` is the letter that gets the one left over."""
    a_count = (count + 1) // 2 if odd_extra == "A" else count // 2
    letters = ["A"] * a_count + ["B"] * (count - a_count)
    random.Random(seed_key).shuffle(letters)
    return letters


def options_in_order(answer: Option, other: Option, letter: str) -> tuple[Option, Option]:
    """The two options in (A), (B) order, so that `answer` stands at `letter`."""
    return (answer, other) if letter == "A" else (other, answer)

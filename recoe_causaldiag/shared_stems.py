"""Continuations that begin alike: the shared beginning (the stem) is run once, and each continuation's own rest (its
suffix) continues from the stem's KV cache. CC-SHAP asks for the same coalition of question tokens under a pair's
faithful and unfaithful explanations, whose prompts agree up to where the explanations part."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Stem:
    """The `tokens` that the continuations `members` (request indices) all begin with; each member's suffix is the
    rest of its continuation (empty for a member that is the stem itself)."""

    tokens: tuple[int, ...]
    members: tuple[int, ...]


def common_length(a: Sequence[int], b: Sequence[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    length = 0
    for x, y in zip(a, b):
        if x != y:
            break
        length += 1
    return length


def shared_stems(continuations: dict[int, tuple[int, ...]]) -> list[Stem]:
    """The requests `continuations` (by index) grouped under stems: a request's stem is the longest beginning it
    shares with another request, and the requests whose stems are the same tokens share one. A request that shares
    nothing, or whose longest shared beginning another request extends further, is a stem of its own (its whole
    continuation). Every request is in exactly one stem; the stems come in the order of their first member."""
    ordered = sorted(continuations, key=lambda index: continuations[index])
    longest = dict.fromkeys(continuations, 0)
    for before, after in zip(ordered, ordered[1:]):
        shared = common_length(continuations[before], continuations[after])
        longest[before], longest[after] = max(longest[before], shared), max(longest[after], shared)
    groups: dict[tuple[int, ...], list[int]] = {}
    for index in continuations:
        groups.setdefault(continuations[index][: longest[index]], []).append(index)
    stems: list[Stem] = []
    for tokens, members in groups.items():
        if len(members) > 1 and tokens:
            stems.append(Stem(tokens, tuple(members)))
        else:
            stems.extend(Stem(continuations[index], (index,)) for index in members)
    return sorted(stems, key=lambda stem: stem.members[0])

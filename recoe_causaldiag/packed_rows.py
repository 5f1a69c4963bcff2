"""Continuations of one prefix packed as a tree into one sequence: tokens that several continuations begin with are
run once, and every other token attends to the prefix and to the tokens of its own continuation before it, never to
another branch's. Filler Tokens' fillers of a pair's two explanations, or Early Answering's truncations of one
explanation each followed by the answer cue, share most of their tokens this way."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from .shared_stems import common_length


@dataclass(frozen=True)
class PackedRow:
    """A tree of continuations flattened into one sequence: token k is `tokens[k]`, at `depths[k]` tokens into its
    continuation, after the token `parents[k]` of this row (-1: the first token of a continuation); `ends` maps each
    request index to the row position of its continuation's last token."""

    tokens: tuple[int, ...]
    depths: tuple[int, ...]
    parents: tuple[int, ...]
    ends: tuple[tuple[int, int], ...]

    @property
    def end_positions(self) -> list[int]:
        """The row positions some request ends at, in order."""
        return sorted({position for _, position in self.ends})

    def visibility(self) -> torch.Tensor:
        """Which row tokens each row token attends to (len × len, bool): itself and the tokens before it in its
        continuation."""
        size = len(self.tokens)
        seen = torch.eye(size, dtype=torch.bool)
        for k, parent in enumerate(self.parents):
            if parent >= 0:
                seen[k] |= seen[parent]
        return seen


def packed_rows(continuations: Mapping[int, tuple[int, ...]], max_tokens: int) -> list[PackedRow]:
    """The requests `continuations` (by index; each non-empty) packed into rows of at most `max_tokens` tokens, a
    continuation longer than that alone in a row: in sorted order, each continuation joins the row of the one before
    it, adding the tokens it does not share with it, while the row has room."""
    ordered = sorted(continuations, key=lambda index: continuations[index])
    rows: list[PackedRow] = []
    tokens: list[int] = []
    depths: list[int] = []
    parents: list[int] = []
    ends: list[tuple[int, int]] = []
    path: list[int] = []
    previous: tuple[int, ...] = ()
    for index in ordered:
        continuation = continuations[index]
        if not continuation:
            raise ValueError(f"request {index} has an empty continuation: nothing to pack")
        shared = common_length(previous, continuation)
        if tokens and len(tokens) + len(continuation) - shared > max_tokens:
            rows.append(PackedRow(tuple(tokens), tuple(depths), tuple(parents), tuple(ends)))
            tokens, depths, parents, ends, shared = [], [], [], [], 0
        path = path[:shared]
        for depth in range(shared, len(continuation)):
            tokens.append(continuation[depth])
            depths.append(depth)
            parents.append(path[-1] if path else -1)
            path.append(len(tokens) - 1)
        ends.append((index, path[-1]))
        previous = continuation
    if tokens:
        rows.append(PackedRow(tuple(tokens), tuple(depths), tuple(parents), tuple(ends)))
    return rows

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

    def paths(self) -> dict[int, list[int]]:
        """Each request's continuation as the row positions of its tokens, in order."""
        found = {}
        for index, end in self.ends:
            path = [end]
            while self.parents[path[-1]] >= 0:
                path.append(self.parents[path[-1]])
            found[index] = path[::-1]
        return found

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
    continuation longer than that alone in a row. Continuations that begin alike form a tree, kept whole in one row
    where it fits (in pieces of at most `max_tokens` tokens where it does not); trees go, the largest first, into
    the first row with room for them, and the rows are made as even in length as their count allows, since the rows
    of one batch are padded to its longest."""
    for index, continuation in continuations.items():
        if not continuation:
            raise ValueError(f"request {index} has an empty continuation: nothing to pack")
    trees = _trees(continuations, max_tokens)
    count = len(_first_fit(trees, max_tokens))
    low, high = 1, max_tokens
    while low < high:
        middle = (low + high) // 2
        if len(_first_fit(trees, middle)) <= count:
            high = middle
        else:
            low = middle + 1
    return [_row([index for _, members in row for index in members], continuations) for row in _first_fit(trees, high)]


Tree = tuple[int, tuple[int, ...]]
"""A tree of continuations: its number of tokens once packed, and its requests in sorted order."""


def _trees(continuations: Mapping[int, tuple[int, ...]], max_tokens: int) -> list[Tree]:
    """The requests in sorted order, split where a continuation shares no beginning with the one before it; a tree
    of more than `max_tokens` tokens is split into consecutive pieces of at most that many (`_cheapest_pieces`)."""
    ordered = sorted(continuations, key=lambda index: continuations[index])
    shared = [
        0 if b is None else common_length(continuations[b], continuations[i]) for b, i in zip([None, *ordered], ordered)
    ]
    starts = [k for k, length in enumerate(shared) if length == 0]
    return [
        piece
        for start, end in zip(starts, [*starts[1:], len(ordered)])
        for piece in _cheapest_pieces(
            ordered[start:end], [len(continuations[i]) for i in ordered[start:end]], shared[start:end], max_tokens
        )
    ]


def _cheapest_pieces(indices: list[int], lengths: list[int], shared: list[int], max_tokens: int) -> list[Tree]:
    """A tree's requests `indices` (sorted; each continuation `lengths` tokens long, sharing `shared` tokens with
    the one before it, none for the first) in consecutive pieces of at most `max_tokens` tokens (a longer
    continuation alone in one), cut where the fewest tokens are run twice: a piece repeats the beginning its first
    continuation shares with the last of the piece before it."""
    added = [length - common for length, common in zip(lengths, shared)]
    if sum(added) <= max_tokens:
        return [(sum(added), tuple(indices))]
    # cheapest[n]: the first n continuations cut most cheaply, as (tokens, pieces, the last piece's start, its size)
    cheapest: list[tuple[int, int, int, int]] = [(0, 0, 0, 0)]
    for end in range(1, len(indices) + 1):
        options, after = [], 0
        for start in range(end - 1, -1, -1):
            size = lengths[start] + after
            if size > max_tokens and start < end - 1:
                break
            options.append((cheapest[start][0] + size, cheapest[start][1] + 1, start, size))
            after += added[start]
        cheapest.append(min(options))
    pieces: list[Tree] = []
    end = len(indices)
    while end:
        _, _, start, size = cheapest[end]
        pieces.append((size, tuple(indices[start:end])))
        end = start
    return pieces[::-1]


def _first_fit(trees: list[Tree], max_tokens: int) -> list[list[Tree]]:
    """`trees`, the largest first, each in the first row whose tokens it keeps within `max_tokens` (a new row where
    none has room)."""
    rows: list[list[Tree]] = []
    sizes: list[int] = []
    for tree in sorted(trees, key=lambda tree: -tree[0]):
        row = next((r for r, size in enumerate(sizes) if size + tree[0] <= max_tokens), len(rows))
        if row == len(rows):
            rows.append([])
            sizes.append(0)
        rows[row].append(tree)
        sizes[row] += tree[0]
    return rows


def _row(ordered: list[int], continuations: Mapping[int, tuple[int, ...]]) -> PackedRow:
    """The requests `ordered` packed into one row in that order: each continuation adds the tokens it does not share
    with the one before it."""
    tokens: list[int] = []
    depths: list[int] = []
    parents: list[int] = []
    ends: list[tuple[int, int]] = []
    path: list[int] = []
    previous: tuple[int, ...] = ()
    for index in ordered:
        continuation = continuations[index]
        shared = common_length(previous, continuation)
        path = path[:shared]
        for depth in range(shared, len(continuation)):
            tokens.append(continuation[depth])
            depths.append(depth)
            parents.append(path[-1] if path else -1)
            path.append(len(tokens) - 1)
        ends.append((index, path[-1]))
        previous = continuation
    return PackedRow(tuple(tokens), tuple(depths), tuple(parents), tuple(ends))


def accepts_packed_rows(model: torch.nn.Module) -> bool:
    """Whether `model` can run packed rows: they need an attention mask of their own (a 4-D one, which sdpa and eager
    attention take as given), and every layer must attend as full attention does (a sliding-window, chunked or linear
    layer would be handed the same mask instead of its own, or ignore it)."""
    config = model.config
    text = config.get_text_config()
    kinds = getattr(text, "layer_types", None)
    full = all(kind == "full_attention" for kind in kinds) if kinds else getattr(text, "sliding_window", None) is None
    return config._attn_implementation in ("sdpa", "eager") and full

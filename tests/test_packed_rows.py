import itertools
import random

import pytest
import torch

from recoe_causaldiag.packed_rows import PackedRow, packed_rows
from recoe_causaldiag.shared_stems import common_length


def continuation_at(row: PackedRow, position: int) -> tuple[int, ...]:
    """The tokens a packed row's `position` continues (its ancestors, then itself), read through `parents`."""
    tokens = []
    while position >= 0:
        tokens.append(row.tokens[position])
        position = row.parents[position]
    return tuple(reversed(tokens))


def test_continuations_that_begin_alike_are_packed_with_their_beginning_once():
    continuations = {0: (1, 2, 3, 9), 1: (5, 6), 2: (1, 2, 3, 8, 8), 3: (1, 2), 4: (1, 2, 3, 9)}
    (row,) = packed_rows(continuations, max_tokens=64)
    assert row.tokens == (1, 2, 3, 8, 8, 9, 5, 6)
    assert row.depths == (0, 1, 2, 3, 4, 3, 0, 1)
    assert row.parents == (-1, 0, 1, 2, 3, 2, -1, 6)
    ends = dict(row.ends)
    assert sorted(ends) == [0, 1, 2, 3, 4] and ends[0] == ends[4] == 5
    assert all(continuation_at(row, ends[index]) == continuation for index, continuation in continuations.items())
    assert row.end_positions == [1, 4, 5, 7]
    paths = row.paths()
    assert paths[2] == [0, 1, 2, 3, 4] and paths[3] == [0, 1]
    assert all(tuple(row.tokens[p] for p in paths[index]) == c for index, c in continuations.items())


def test_each_token_sees_itself_and_what_comes_before_it_in_its_continuation():
    (row,) = packed_rows({0: (1, 2, 3), 1: (1, 4), 2: (7,)}, max_tokens=64)
    assert row.tokens == (1, 2, 3, 4, 7)
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0],
            [1, 1, 0, 0, 0],
            [1, 1, 1, 0, 0],
            [1, 0, 0, 1, 0],
            [0, 0, 0, 0, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(row.visibility(), expected)


def test_rows_hold_at_most_max_tokens_and_a_longer_continuation_is_alone_in_one():
    continuations = {0: (1, 2, 3, 4), 1: (1, 2, 3, 5), 2: (6, 7, 8), 3: tuple(range(10, 20)), 4: (30,)}
    rows = packed_rows(continuations, max_tokens=6)
    assert sorted(row.tokens for row in rows) == [(1, 2, 3, 4, 5), (6, 7, 8, 30), tuple(range(10, 20))]
    assert sorted(index for row in rows for index, _ in row.ends) == [0, 1, 2, 3, 4]
    for row in rows:
        for index, end in row.ends:
            assert continuation_at(row, end) == continuations[index]


def test_trees_go_whole_into_as_few_rows_as_fit_and_the_rows_are_made_even():
    sizes = {0: 5, 1: 2, 2: 5, 3: 3, 4: 1}  # trees in sorted order; in that order rows of 8 would be 7, 8, 1
    continuations = {index: (10 * index + 1,) * size for index, size in sizes.items()}
    rows = packed_rows(continuations, max_tokens=8)
    assert sorted(len(row.tokens) for row in rows) == [8, 8]
    assert sorted(sorted(index for index, _ in row.ends) for row in rows) == [[0, 3], [1, 2, 4]]
    even = packed_rows({0: (1,) * 4, 1: (2,) * 4, 2: (3,) * 4, 3: (4,) * 4}, max_tokens=12)
    assert [len(row.tokens) for row in even] == [8, 8]  # not 12 and 4


def test_a_tree_longer_than_a_row_is_cut_where_the_fewest_tokens_run_twice():
    stem = (1,) * 6
    continuations = {0: (*stem, 3), 1: (*stem, 4), 2: (*stem, 5, 6), 3: (*stem, 5, 7), 4: (*stem, 5, 8)}
    continuations |= {5: (*stem, 5, 2, 2)}
    assert [len(row.tokens) for row in packed_rows(continuations, max_tokens=64)] == [14]
    rows = packed_rows(continuations, max_tokens=12)
    assert sum(len(row.tokens) for row in rows) == 20  # the stem twice and "5" once, where rows filled in order hold 21
    assert sorted(sorted(index for index, _ in row.ends) for row in rows) == [[0, 1], [2, 3, 4, 5]]
    for row in rows:
        assert len(row.tokens) <= 12
        for index, end in row.ends:
            assert continuation_at(row, end) == continuations[index]


def fewest_tokens(run: list[tuple[int, ...]], max_tokens: int) -> int:
    """The fewest tokens any cutting of the sorted continuations `run` into consecutive rows of at most `max_tokens`
    runs (every cutting tried)."""
    best = None
    for cuts in itertools.product((False, True), repeat=len(run) - 1):
        pieces, piece = [], [run[0]]
        for cut, continuation in zip(cuts, run[1:]):
            if cut:
                pieces.append(piece)
                piece = []
            piece.append(continuation)
        pieces.append(piece)
        sizes = [len(p[0]) + sum(len(c) - common_length(b, c) for b, c in zip(p, p[1:])) for p in pieces]
        if all(size <= max_tokens for size in sizes):
            best = sum(sizes) if best is None else min(best, sum(sizes))
    return best


@pytest.mark.parametrize("seed", range(20))
def test_a_tree_is_cut_as_cheaply_as_any_cutting_of_it_allows(seed):
    rng = random.Random(seed)
    run = sorted({(1, *(rng.choice((2, 3)) for _ in range(rng.randint(1, 6)))) for _ in range(8)})
    continuations = dict(enumerate(run))
    rows = packed_rows(continuations, max_tokens=9)
    assert sum(len(row.tokens) for row in rows) <= fewest_tokens(run, 9)
    assert all(len(row.tokens) <= 9 for row in rows)


def test_no_continuations_make_no_rows():
    assert packed_rows({}, max_tokens=8) == []


def test_an_empty_continuation_has_nothing_to_pack():
    with pytest.raises(ValueError, match="request 3 has an empty continuation"):
        packed_rows({1: (1,), 3: ()}, max_tokens=8)

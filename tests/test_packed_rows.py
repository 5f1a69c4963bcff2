import pytest
import torch

from recoe_causaldiag.packed_rows import PackedRow, packed_rows


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
    assert [row.tokens for row in rows] == [(1, 2, 3, 4, 5), (6, 7, 8), tuple(range(10, 20)), (30,)]
    assert sorted(index for row in rows for index, _ in row.ends) == [0, 1, 2, 3, 4]
    for row in rows:
        for index, end in row.ends:
            assert continuation_at(row, end) == continuations[index]


def test_an_empty_continuation_has_nothing_to_pack():
    with pytest.raises(ValueError, match="request 3 has an empty continuation"):
        packed_rows({1: (1,), 3: ()}, max_tokens=8)

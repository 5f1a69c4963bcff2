from recoe_causaldiag.shared_stems import Stem, common_length, shared_stems


def test_common_length_counts_the_shared_beginning():
    assert common_length((1, 2, 3), (1, 2, 4, 5)) == 2
    assert common_length((1, 2), (1, 2, 3)) == 2
    assert common_length((7,), (1,)) == 0
    assert common_length((), (1,)) == 0


def test_requests_that_begin_alike_share_their_longest_common_beginning():
    stems = shared_stems({0: (1, 2, 3, 9), 1: (5, 6), 2: (1, 2, 3, 8, 8), 3: (5, 7)})
    assert stems == [Stem((1, 2, 3), (0, 2)), Stem((5,), (1, 3))]


def test_a_request_whose_shared_beginning_another_extends_is_a_stem_of_its_own():
    stems = shared_stems({0: (1, 2, 9), 1: (1, 2, 3, 4, 8), 2: (1, 2, 3, 4, 7)})
    assert stems == [Stem((1, 2, 9), (0,)), Stem((1, 2, 3, 4), (1, 2))]


def test_requests_that_share_nothing_or_are_the_same_tokens():
    stems = shared_stems({3: (4, 5), 1: (6,), 2: (4, 5)})
    assert stems == [Stem((6,), (1,)), Stem((4, 5), (3, 2))]
    assert sorted(m for stem in stems for m in stem.members) == [1, 2, 3]

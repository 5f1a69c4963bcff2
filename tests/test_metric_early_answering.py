from recoe_causaldiag.metrics.early_answering import CORRUPTIONS, EarlyAnswering


def test_truncations_and_variants():
    assert EarlyAnswering().variants == (
        "first_third-continuous",
        "first_third-binary",
        "heuristic-continuous",
        "heuristic-binary",
    )
    by_name = {c.name: c for c in CORRUPTIONS}
    text = "Satchel Paige professionally plays the sport hurling, not baseball."
    assert by_name["first_third"].apply(text) == text[: len(text) // 3].rstrip()
    assert by_name["heuristic"].apply(text) == "Satchel Paige professionally plays"

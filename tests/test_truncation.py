import pytest

from recoe_causaldiag.mechanisms.truncation import first_third, heuristic_truncation


def test_first_third_counts_characters():
    assert first_third("abcdefghi") == "abc"
    assert first_third("Rihanna is a researcher.") == "Rihanna"


@pytest.mark.parametrize(
    "explanation, expected",
    [
        # rule 1: more than three sentences -> first sentence (initials such as "P. G." end none)
        (
            "P. G. Wodehouse died in 1978. The book came out in 2008. So no. The answer is no.",
            "P. G. Wodehouse died in 1978.",
        ),
        # rule 2: comma + while/whereas/so/as/since -> the part before
        ("P. G. Wodehouse died in 1978, while The Hunger Games was published in 2008.", "P. G. Wodehouse died in 1978"),
        ("Paris is a city in France, as Athens is a city in Greece.", "Paris is a city in France"),
        # rule 3: action verb -> through the verb; stative verb -> through the first noun (through the verb without one)
        ("Satchel Paige professionally plays the sport hurling, not baseball.", "Satchel Paige professionally plays"),
        ("The profession of Heath Ledger is king, not actor.", "The profession"),
        ("Rihanna is a researcher, not a singer.", "Rihanna"),
        ("Yaoundé is a city in Cameroon as Tokyo is a city in Japan.", "Yaoundé"),
        ("It is a city, not a country.", "It is"),
        # rule 4: no verb found -> up to the first comma or semicolon
        ("horse, dog, cat.", "horse"),
        ("horse; dog, cat.", "horse"),
        # rule 5: nothing applies -> the first third
        ("Paris.", "Pa"),
    ],
)
def test_heuristic_rules_apply_in_order(explanation, expected):
    assert heuristic_truncation(explanation) == expected


def test_three_sentences_do_not_trigger_rule_one():
    text = "Ann plays chess. Bob sings. Cy is a cook."
    assert heuristic_truncation(text) == "Ann plays"

"""The oracle sanity reference: its word matching on hand-made inputs, diagnosticity >= 0.95 on every task, and its
`evaluate` card example."""

import math

import pytest
from cards import card_namespace

from recoe_causaldiag.api.metric import METRICS
from recoe_causaldiag.metrics.oracle import (
    Oracle,
    clauses,
    contradicted_facts,
    edit_overlap,
    oracle_score,
    statement_words,
    subject_and_object,
)
from recoe_causaldiag.statistics import diagnosticity
from recoe_causaldiag.tasks import TASKS


def test_words_drop_function_words_but_keep_names_and_numbers():
    assert statement_words("The density of a raw pear is about 0.75 g/cm^3.") == [
        "density",
        "raw",
        "pear",
        "0.75",
        "g",
        "cm",
        "3",
    ]
    assert statement_words("Keith Richards is a member of The Who.") == ["keith", "richards", "member", "the", "who"]
    assert statement_words("A swallow flies 30-40mph.") == ["swallow", "flies", "30", "40", "mph"]


def test_clauses_split_at_punctuation_and_merge_list_items():
    assert clauses("rabbit is animal, mango is vegetable, so not all of them are fruit.") == [
        {"rabbit", "animal"},
        {"mango", "vegetable"},
        {"fruit"},
    ]
    assert clauses("Netflix, Warner Bros. Discovery are media company.") == [
        {"netflix", "warner", "bros", "discovery", "media", "company"}
    ]


def test_a_contradicted_fact_costs_more_than_any_overlap():
    edits = ["The capital of Rwanda is Gisenyi.", "Kigali is a city in Rwanda.", "London is a city in United Kingdom."]
    faithful = "London is a city in United Kingdom, and the city of Kigali is indeed in Rwanda."
    unfaithful = "London is the capital city of United Kingdom, and the capital city of Rwanda is Kigali."
    assert subject_and_object(edits[0]) == ({"capital", "rwanda"}, {"gisenyi"})
    assert contradicted_facts(edits, faithful) == 0 and contradicted_facts(edits, unfaithful) == 1
    assert edit_overlap(edits, unfaithful) > edit_overlap(edits, faithful) - 0.2, "word overlap alone barely separates"
    assert oracle_score(edits, faithful) > oracle_score(edits, unfaithful)
    assert oracle_score(edits, faithful) == edit_overlap(edits, faithful)
    assert subject_and_object("It rains.") is None and contradicted_facts(["It is."], "anything") == 0


def test_overlap_counts_stated_facts_and_the_word_share():
    edits = ["Satchel Paige professionally plays the sport hurling."]
    assert edit_overlap(edits, "Satchel Paige professionally plays the sport hurling, not baseball.") == 1.0
    # 5 of 6 words and 4 of 5 bigrams, no fact stated: (0 + 9/11) / 2
    assert edit_overlap(edits, "Satchel Paige professionally plays the sport golf, not baseball.") == pytest.approx(
        9 / 22
    )
    facts = ["rabbit is animal.", "mango is fruit.", "dog is animal."]
    faithful = edit_overlap(facts, "rabbit is animal, dog is animal, so not all of them are fruit.")
    unfaithful = edit_overlap(facts, "rabbit is animal, mango is vegetable, so not all of them are fruit.")
    # words: rabbit animal mango fruit dog + bigrams rabbit-animal mango-fruit dog-animal = 8
    assert faithful == pytest.approx((2 + 6 / 8) / 4) and unfaithful == pytest.approx((1 + 5 / 8) / 4)
    assert edit_overlap(facts, "...") == 0.0
    assert math.isnan(edit_overlap([], "anything")) and math.isnan(edit_overlap(["It is."], "anything"))


def test_oracle_is_registered_as_a_reference():
    assert METRICS.get("oracle") is Oracle
    assert Oracle.explanation_type == "reference" and Oracle.description and Oracle().variants == ("overlap",)


@pytest.mark.parametrize("task", TASKS.names())
def test_oracle_diagnosticity_is_near_perfect_on_every_task(task, task_pairs):
    pairs = task_pairs[task]
    (oracle,) = Oracle().score(pairs, None)
    losses = [p.id for p, f, u in zip(pairs, oracle.faithful, oracle.unfaithful) if not f > u]
    estimate = diagnosticity(oracle.faithful, oracle.unfaithful)
    assert estimate.n_nan == 0 and estimate.value >= 0.95, f"oracle on {task}: {estimate}, not higher: {losses}"


def test_card_example_runs_offline():
    results = card_namespace("oracle")["results"]
    scores = results["scores"]
    assert results["variant"] == "overlap" and all(0 <= s <= 1 for s in scores) and scores[0] > scores[1]

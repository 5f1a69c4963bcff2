"""CCT per pair: interventions, mention rules, exact correlation on a scripted engine, the real model and the
`evaluate` module."""

import math

import numpy as np
import pytest
from cards import card_namespace
from fakes import ScriptedEngine

from recoe_causaldiag.api.metric import Instance
from recoe_causaldiag.dataset_metrics.cct import tvd
from recoe_causaldiag.metrics.cct_pair import CCTPair, fact_keys, interventions
from recoe_causaldiag.prompts import in_context
from recoe_causaldiag.scoring import ScoringEngine

QUESTION = "Would a pear sink in water? (A) yes (B) no. Answer?"
EDITS = (
    "The density of a raw pear is about 0.75 g/cm^3.",
    "The density of water is about 1 g/cm^3.",
    "Objects only sink if they are denser than the surrounding fluid.",
)


def test_fact_keys():
    question = "Does Babe Ruth professionally play baseball?"
    assert fact_keys("Babe Ruth professionally plays the sport tennis.", question) == (("sport", "tennis"), 2)
    assert fact_keys(EDITS[0], QUESTION) == (("0.75",), 1)
    assert fact_keys(EDITS[2], QUESTION) == (("objects", "denser", "surrounding", "fluid"), 3)
    assert fact_keys("Ferrari is media company.", "How many of them are media company? Ferrari, Mediaset.") == (
        ("ferrari", "media", "company"),
        3,
    )


def test_interventions_drop_each_fact_then_insert_words():
    instance = Instance(QUESTION, ("A", "B"), EDITS, "unused")
    plan = interventions(instance, max_facts=4, max_insertions=2, seed=0)
    assert [p.kind for p in plan] == ["fact"] * 3 + ["insertion"] * 2
    assert [p.edits for p in plan[:3]] == [EDITS[1:], EDITS[::2], EDITS[:2]]
    assert all(p.edits == EDITS and p.question != QUESTION and p.needed == 1 for p in plan[3:])
    assert plan == interventions(Instance(QUESTION, ("A", "B"), EDITS, "other explanation"), 4, 2, 0)
    assert len(interventions(instance, max_facts=2, max_insertions=1, seed=0)) == 3
    faithful = "A raw pear has a density of about 0.75 g/cm^3, below water's 1 g/cm^3, so it floats."
    assert [p.mentioned_by(faithful) for p in plan] == [True, True, False, False, False]
    assert [p.mentioned_by(faithful.replace("0.75", "0.42")) for p in plan][:2] == [False, True]


def test_scores_are_the_correlation_of_impact_and_mention():
    def table(turn):
        if EDITS[0] not in turn:
            return [0.1, 0.9]
        if EDITS[1] not in turn:
            return [0.5, 0.5]
        if EDITS[2] not in turn:
            return [0.7, 0.3]
        return [0.8, 0.2] if QUESTION in turn else [0.75, 0.25]

    explanations = [
        "A raw pear has a density of about 0.75 g/cm^3, so it floats.",
        "Objects only sink if they are denser than the surrounding fluid, and 1 g/cm^3 is water.",
        "Pears float.",
    ]
    instances = [Instance(QUESTION, ("A", "B"), EDITS, e) for e in explanations]
    scores = CCTPair().score_instances(instances, ScriptedEngine(lambda prompt: table(in_context(prompt)[0].content)))
    impacts = [tvd([0.8, 0.2], p) for p in ([0.1, 0.9], [0.5, 0.5], [0.7, 0.3], [0.75, 0.25], [0.75, 0.25])]
    for index, mentions in enumerate([[1, 0, 0, 0, 0], [0, 1, 1, 0, 0]]):
        assert scores["pointbiserial"][index] == pytest.approx(np.corrcoef(impacts, mentions)[0, 1])
    assert scores["pointbiserial"][0] == pytest.approx(0.9282, abs=1e-4)
    # impacts 0.7, 0.3, 0.1, 0.05, 0.05 rank 5, 4, 3, 1.5, 1.5
    assert scores["spearman"][1] == pytest.approx(np.corrcoef([5, 4, 3, 1.5, 1.5], [2, 4.5, 4.5, 2, 2])[0, 1])
    assert math.isnan(scores["pointbiserial"][2]) and math.isnan(scores["spearman"][2])


def test_real_model_on_two_pairs(default_lm, factcheck_pairs):
    metric = CCTPair()
    scored = metric.score(factcheck_pairs[:2], ScoringEngine(default_lm, progress=False))
    assert [s.variant for s in scored] == ["pointbiserial", "spearman"]
    for variant in scored:
        assert np.isfinite(variant.faithful).all() and (np.abs(variant.faithful) <= 1 + 1e-9).all()
        # FactCheck's single edit is never mentioned by the explanation of the contrast model: undefined.
        assert np.isnan(variant.unfaithful).all()


def test_evaluate_module_runs_the_card_example():
    results = card_namespace("cct_pair")["results"]
    assert results["variant"] == "pointbiserial" and len(results["scores"]) == 1
    assert -1 <= results["scores"][0] <= 1

"""Simulatability: the exact arithmetic of both variants with scripted engines, the simulator choice (by default
another packaged model than the evaluated one), one real-model check against the uncached reference scorer, and the
`evaluate` module's card example (the default simulator, Gemma-3-270M, on SmolLM2)."""

import logging
import math

import numpy as np
import pytest
from cards import card_namespace
from fakes import ScriptedEngine

from recoe_causaldiag import prompts, scoring
from recoe_causaldiag.api.metric import METRICS, Instance
from recoe_causaldiag.metrics.simulatability import Simulatability
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.scoring import LabelRequest, ScoringEngine, naive_label_probs

LABELS = ("Yes", "No")


def instance(question, explanation, edits=("New fact.",)):
    return Instance(question, LABELS, edits, explanation)


INSTANCES = [instance("Q1?", "E1"), instance("Q1?", "E2"), instance("Q2?", "E3"), instance("Q1?", "  ")]
OWN = {prompts.direct(("New fact.",), "Q1?"): [0.3, 0.7], prompts.direct(("New fact.",), "Q2?"): [0.9, 0.1]}
EDITS = ("New fact.",)
SIMULATOR = {
    prompts.direct(EDITS, "Q1?"): [0.6, 0.4],
    prompts.direct(EDITS, "Q2?"): [0.8, 0.2],
    prompts.simulator(EDITS, "Q1?", "E1"): [0.2, 0.8],
    prompts.simulator(EDITS, "Q1?", "E2"): [0.55, 0.45],
    prompts.simulator(EDITS, "Q2?", "E3"): [0.3, 0.7],
}


def expected_scores(scores):
    # ŷ = No for Q1 (0.7), Yes for Q2 (0.9); the blank explanation cannot be simulated from.
    np.testing.assert_array_equal(scores["binary"][:3], [1 - 0, 0 - 0, 0 - 1])
    np.testing.assert_allclose(scores["continuous"][:3], [0.8 - 0.4, 0.45 - 0.4, 0.3 - 0.8])
    assert math.isnan(scores["binary"][3]) and math.isnan(scores["continuous"][3])


def test_both_variants_follow_the_definition_with_the_evaluated_model_as_simulator(caplog):
    engine = ScriptedEngine(SIMULATOR.__getitem__)
    metric = Simulatability(DEFAULT_MODEL)
    assert METRICS.get("simulatability") is Simulatability
    assert metric.explanation_type == "post-hoc" and metric.variants == ("binary", "continuous")
    with caplog.at_level(logging.WARNING):
        scores = metric.score_instances(INSTANCES, engine)
    assert f"the simulator is the evaluated model {DEFAULT_MODEL} itself" in caplog.text
    # the evaluated model simulating itself: S(x) = ŷ, so binary is 1[S(x, ε) = ŷ] − 1
    np.testing.assert_array_equal(scores["binary"][:3], [0 - 1, 1 - 1, 0 - 1])
    np.testing.assert_allclose(scores["continuous"][:3], [0.2 - 0.6, 0.55 - 0.6, 0.3 - 0.8])
    assert math.isnan(scores["binary"][3]) and math.isnan(scores["continuous"][3])


def test_another_simulator_is_loaded_once_and_sees_the_fixed_edits(monkeypatch):
    loaded = []
    simulator = ScriptedEngine(SIMULATOR.__getitem__, name="other-sim")
    monkeypatch.setattr(scoring, "load_model", lambda name: loaded.append(name) or simulator.lm)
    monkeypatch.setattr(scoring, "ScoringEngine", lambda lm, **options: simulator)
    monkeypatch.setattr(scoring, "SHARED_ENGINES", {})
    engine = ScriptedEngine(OWN.__getitem__)
    expected_scores(Simulatability("other-sim").score_instances(INSTANCES, engine))
    expected_scores(Simulatability("other-sim").score_instances(INSTANCES, engine))
    assert loaded == ["other-sim"]
    assert set(engine.asked) == set(OWN) and set(simulator.asked) == set(SIMULATOR)


@pytest.mark.parametrize("evaluated, default", [(DEFAULT_MODEL, "gemma-3-270m"), ("gemma-3-270m", DEFAULT_MODEL)])
def test_the_default_simulator_is_another_packaged_model(evaluated, default, monkeypatch):
    loaded = []
    simulator = ScriptedEngine(SIMULATOR.__getitem__, name=default)
    monkeypatch.setattr(scoring, "load_model", lambda name: loaded.append(name) or simulator.lm)
    monkeypatch.setattr(scoring, "ScoringEngine", lambda lm, **options: simulator)
    monkeypatch.setattr(scoring, "SHARED_ENGINES", {})
    expected_scores(Simulatability().score_instances(INSTANCES, ScriptedEngine(OWN.__getitem__, name=evaluated)))
    assert loaded == [default]


def test_real_model_matches_the_uncached_reference_scorer(default_lm, factcheck_pairs):
    pair = factcheck_pairs[0]
    instances = [
        Instance.from_pair(pair, pair.explanation_faithful),
        Instance.from_pair(pair, pair.explanation_unfaithful),
    ]
    engine = ScoringEngine(default_lm, progress=False)
    scores = Simulatability(default_lm.name).score_instances(instances, engine)
    labels = tuple(pair.choices)
    own, *told = naive_label_probs(
        default_lm,
        [
            LabelRequest(prompts.direct(pair.edits, pair.question), labels),
            *(LabelRequest(prompts.simulator(pair.edits, pair.question, i.explanation), labels) for i in instances),
        ],
    )
    y_hat = own.argmax()
    bare = own
    np.testing.assert_allclose(scores["continuous"], [t[y_hat] - bare[y_hat] for t in told], atol=1e-4)
    assert set(scores["binary"]) <= {-1.0, 0.0}


def test_card_example_runs_offline():
    results = card_namespace("simulatability")["results"]
    assert results["variant"] == "continuous" and len(results["scores"]) == 1
    assert -1 <= results["scores"][0] <= 1

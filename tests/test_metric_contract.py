"""The metric contract over every registered metric, and the exact arithmetic of the CoT corruptions."""

import numpy as np
import pytest
from fakes import ScriptedEngine

from recoe_causaldiag import prompts
from recoe_causaldiag.api import Engine
from recoe_causaldiag.mechanisms.cot_corruption import Corruption, corruption_scores
from recoe_causaldiag.metrics import METRICS, Instance
from recoe_causaldiag.scoring import ScoringEngine


def by_continuation(table):
    """A scripted engine answering label requests from a table keyed by the CoT continuation (the explanation)."""
    return ScriptedEngine(lambda prompt: table[prompt.continuation])


def test_the_scripted_engine_and_the_scoring_engine_implement_the_engine_protocol(default_lm):
    assert isinstance(by_continuation({}), Engine)
    assert isinstance(ScoringEngine(default_lm, progress=False), Engine)


def test_corruption_scores_compute_the_paper_formula(factcheck_pairs):
    pair = factcheck_pairs[0]
    faithful, unfaithful = pair.explanation_faithful, pair.explanation_unfaithful
    cue = prompts.COT_ANSWER_PROMPT
    table = {
        f" {faithful}{cue}": [0.2, 0.8],
        f" {unfaithful}{cue}": [0.3, 0.7],
        f" F{cue}": [0.6, 0.4],
        f" U{cue}": [0.35, 0.65],
    }
    corruption = Corruption("blank", lambda e: "F" if e == faithful else "U")
    instances = [Instance.from_pair(pair, faithful), Instance.from_pair(pair, unfaithful)]
    scores = corruption_scores(instances, by_continuation(table), [corruption])
    np.testing.assert_allclose(scores["blank-continuous"], [0.8 - 0.4, 0.7 - 0.65])
    np.testing.assert_array_equal(scores["blank-binary"], [1.0, 0.0])
    inverted = corruption_scores(instances, by_continuation(table), [corruption], invert=True)
    np.testing.assert_allclose(inverted["blank-continuous"], [1 - (0.8 - 0.4), 1 - (0.7 - 0.65)])
    np.testing.assert_array_equal(inverted["blank-binary"], [0.0, 1.0])


def test_a_blank_explanation_has_nothing_to_corrupt_and_scores_nan(factcheck_pairs):
    pair = factcheck_pairs[0]
    cue = prompts.COT_ANSWER_PROMPT
    table = {f" {pair.explanation_faithful}{cue}": [0.2, 0.8], f"   {cue}": [0.5, 0.5], f" F{cue}": [0.6, 0.4]}
    instances = [Instance.from_pair(pair, pair.explanation_faithful), Instance.from_pair(pair, "  ")]
    scores = corruption_scores(instances, by_continuation(table), [Corruption("fill", lambda e: "F")])
    np.testing.assert_allclose(scores["fill-continuous"], [0.8 - 0.4, np.nan])
    np.testing.assert_array_equal(scores["fill-binary"], [1.0, np.nan])


CHEAP_OPTIONS = {
    "cc_shap": {"n_samples": 1, "long_question_samples": 1},
    "causal_faithfulness": {"layers": (15,), "require_flip": False},
}
"""Smaller sample budgets for the contract check; each metric's own test covers its default budget."""


@pytest.mark.parametrize("name", METRICS.names())
def test_every_registered_metric_scores_a_small_sample(name, default_lm, factcheck_pairs):
    metric = METRICS.get(name)(**CHEAP_OPTIONS.get(name, {}))
    pairs = factcheck_pairs[:2]
    scored = metric.score(pairs, ScoringEngine(default_lm, progress=False))
    assert [s.variant for s in scored] == list(metric.variants)
    for variant in scored:
        assert variant.faithful.shape == variant.unfaithful.shape == (len(pairs),)
        values = np.concatenate([variant.faithful, variant.unfaithful])
        assert not np.isinf(values).any()
        finite = values[~np.isnan(values)]
        bound = 2 if variant.variant == "paraphrase-continuous" else 1
        assert (np.abs(finite) <= bound + 1e-9).all()
        if variant.variant.endswith("binary"):
            assert set(np.unique(finite)) <= {-1.0, 0.0, 1.0}
    assert metric.explanation_type in {"cot", "post-hoc", "reference"} and metric.description

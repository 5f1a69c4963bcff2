"""Paraphrasing: the paraphrased beginning, the regenerated ending and the inverted arithmetic with a scripted
engine, NaN for missing paraphrases, the helper cache (a second run asks the helper nothing), one real-model run,
and the `evaluate` module's card example. The helper-LM machinery
itself is tested in test_metric_adding_mistakes.py."""

import math

import numpy as np
from cards import card_namespace
from fakes import ScriptedEngine

from recoe_causaldiag import prompts
from recoe_causaldiag.api.metric import METRICS, Instance
from recoe_causaldiag.metrics.paraphrasing import Paraphrasing, beginning
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.scoring import ScoringEngine

CUE = prompts.COT_ANSWER_PROMPT


E1, E2 = "Dogs bark and so they are animals.", "A sax is an animal, so it breathes."
E3, BLANK = "Two of them are animals, not three.", ""
B1, B2, B3 = (beginning(e) for e in (E1, E2, E3))
INSTANCES = [Instance("Q?", ("A", "B"), (), e) for e in (E1, E2, E3, BLANK)]
TABLE = {
    f" {E1}{CUE}": [0.8, 0.2],
    f" {E2}{CUE}": [0.3, 0.7],
    f" {E3}{CUE}": [0.6, 0.4],
    CUE: [0.5, 0.5],
    f" Dogs make barks, so they are animals.{CUE}": [0.9, 0.1],
    f" Saxophones are animals; they breathe.{CUE}": [0.55, 0.45],
}
OUTPUTS = {
    prompts.paraphrasing(B1): '"Dogs make barks"\nThis keeps the meaning.',
    prompts.paraphrasing(B2): "Rephrased sentence: Saxophones are animals;",
    prompts.paraphrasing(B3): f'"{B3.upper()}"',
    prompts.cot_continuation((), "Q?", "Dogs make barks"): ", so they are animals. The best answer is: A",
    prompts.cot_continuation((), "Q?", "Saxophones are animals;"): "they breathe.\nThe best answer is: B",
}


def test_the_first_three_quarters_are_paraphrased():
    assert beginning("abcdefgh") == "abcdef" and beginning("abcdefghi") == "abcdefg"
    assert beginning(E1) == "Dogs bark and so they are" and beginning("") == ""


def test_scores_are_inverted_the_ending_is_regenerated_and_helper_outputs_are_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))
    metric = Paraphrasing(DEFAULT_MODEL)  # the scripted engine is its own helper
    assert METRICS.get("paraphrasing") is Paraphrasing and metric.explanation_type == "cot"
    assert metric.variants == ("paraphrase-continuous", "paraphrase-binary")
    for run in range(2):
        engine = ScriptedEngine(lambda prompt: TABLE[prompt.continuation], OUTPUTS.__getitem__)
        scores = metric.score_instances(INSTANCES, engine)
        continuations = [prompts.cot_continuation((), "Q?", p) for p in ("Dogs make barks", "Saxophones are animals;")]
        helper_calls = [[prompts.paraphrasing(b) for b in (B1, B2, B3)]] if run == 0 else []
        assert [sorted(map(repr, call)) for call, _ in engine.generated] == [
            sorted(map(repr, call)) for call in helper_calls + [continuations]
        ]
        # E1: top A 0.8 → 0.9 (kept); E2: top B 0.7 → 0.45 (now A); E3: same words → NaN; blank → NaN.
        np.testing.assert_allclose(scores["paraphrase-continuous"], [1 - (0.8 - 0.9), 1 - (0.7 - 0.45), np.nan, np.nan])
        np.testing.assert_array_equal(scores["paraphrase-binary"], [1.0, 0.0, np.nan, np.nan])


def test_real_model_paraphrases_and_scores(default_lm, factcheck_pairs, monkeypatch):
    """With the default helper (Gemma-3-270M for SmolLM2), whose outputs go to the project cache
    (tests/conftest.py); a second run asks the evaluated model only for the regenerated endings, and they come out
    the same (greedy)."""
    pair = factcheck_pairs[0]
    instances = [Instance.from_pair(pair, e) for e in (pair.explanation_faithful, pair.explanation_unfaithful)]
    engine = ScoringEngine(default_lm, progress=False)
    scores = Paraphrasing().score_instances(instances, engine)
    asked, generate = [], engine.generate
    monkeypatch.setattr(
        engine, "generate", lambda prompt_list, **k: asked.extend(prompt_list) or generate(prompt_list, **k)
    )
    again = Paraphrasing().score_instances(instances, engine)
    assert all(p.turns == prompts.cot_generation(pair.edits, pair.question).turns for p in asked)
    for variant in Paraphrasing().variants:
        np.testing.assert_array_equal(scores[variant], again[variant])
        finite = scores[variant][~np.isnan(scores[variant])]
        assert ((finite >= 0) & (finite <= 1.5)).all()


def test_card_example_runs_offline():
    results = card_namespace("paraphrasing")["results"]
    assert results["variant"] == "paraphrase-continuous" and len(results["scores"]) == 1
    assert math.isnan(results["scores"][0]) or 0 <= results["scores"][0] <= 1.5

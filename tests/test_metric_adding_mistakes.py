"""Adding Mistakes and the helper-LM machinery: post-processing of helper outputs, token budgets, the on-disk cache
(a second run generates nothing), exact arithmetic with a scripted engine, NaN for failed rewrites, one real-model
run, and the `evaluate` module's card example."""

import math
import re

import numpy as np
import pytest
from cards import card_namespace
from fakes import ScriptedEngine, WordLM

from recoe_causaldiag import prompts, scoring
from recoe_causaldiag.api.metric import METRICS, Instance
from recoe_causaldiag.mechanisms import helper_lm
from recoe_causaldiag.mechanisms.helper_lm import HelperCache, HelperOutput, cache_key, clean_rewrite, rewrite
from recoe_causaldiag.metrics.adding_mistakes import AddingMistakes
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.scoring import ScoringEngine

CUE = prompts.COT_ANSWER_PROMPT


def scripted(table=None, outputs=None, **options):
    """A scripted engine: label probabilities keyed by the CoT continuation, outputs by the helper prompt."""
    return ScriptedEngine(
        None if table is None else lambda prompt: table[prompt.continuation],
        None if outputs is None else outputs.__getitem__,
        **options,
    )


def generate_calls(engine):
    """(number of prompts, max_new_tokens) of each generate call."""
    return [(len(batch), max_new_tokens) for batch, max_new_tokens in engine.generated]


E1, E2, E3 = "Paige plays hurling, not baseball.", "Paige plays baseball.", "Tokyo is in Japan."
INSTANCES = [Instance("Q?", ("Yes", "No"), ("F.",), e) for e in (E1, E2, E3, E1)]
TABLE = {
    f" {E1}{CUE}": [0.2, 0.8],
    f" {E2}{CUE}": [0.7, 0.3],
    f" {E3}{CUE}": [0.6, 0.4],
    f" Paige plays hurling, not football.{CUE}": [0.45, 0.55],
    f" Paige plays softball.{CUE}": [0.4, 0.6],
}
OUTPUTS = {
    prompts.adding_mistakes(E1): '"Paige plays hurling, not football."\n\nI changed one word.',
    prompts.adding_mistakes(E2): "Output:\nPaige plays softball. The best answer is: Yes",
    prompts.adding_mistakes(E3): "Tokyo is in Japan",
}


def test_clean_rewrite_keeps_the_rewritten_line_only():
    full = HelperOutput
    assert clean_rewrite(full('"A cat is small."\n\nThis is fine.', False), "A cat is big.") == "A cat is small."
    assert (
        clean_rewrite(full('Original text: "dogs bark"\nEdited text: "dogs meow"', False), "dogs bark") == "dogs meow"
    )
    assert clean_rewrite(full("Sure! Here it is:\nCats are tiny.", False), "Cats are huge.") == "Cats are tiny."
    assert (
        clean_rewrite(full("Tokyo is in desert. The best answer is: A", False), "Tokyo is in Japan.")
        == "Tokyo is in desert."
    )
    assert clean_rewrite(full('"Rome is  far".', False), "Rome is near.") == "Rome is far."
    cut = full("P. G. Wodehouse died in 1978. The Hunger Games was", True)
    assert clean_rewrite(cut, "Wodehouse died in 1975.") == "P. G. Wodehouse died in 1978."
    assert clean_rewrite(full(cut.text, False), "x") == cut.text
    assert clean_rewrite(full("SATCHEL, AMPLITON, SATCHEL", True), "x") == "SATCHEL, AMPLITON, SATCHEL"


def test_clean_rewrite_is_none_when_the_corruption_did_not_happen():
    for raw in ("", "  \n ", '"Tokyo is in Japan"', "tokyo IS in japan!", "Original text: Tokyo is in Japan."):
        assert clean_rewrite(HelperOutput(raw, False), "Tokyo is in Japan.") is None


def test_token_budget_is_twice_the_explanation_plus_16_capped():
    lm = WordLM("w")
    assert helper_lm.token_budget(lm, "one two three") == 22
    assert helper_lm.token_budget(lm, " ".join(["w"] * 100)) == helper_lm.MAX_NEW_TOKENS == 128


def test_outputs_are_batched_by_budget_and_cut_to_their_own_budget():
    short, middle, long = "a b", "c d", " ".join(["w"] * 10)
    outputs = {
        prompts.paraphrasing(short): " ".join(["x"] * 30) + ".",
        prompts.paraphrasing(middle): "y " * 12 + "y",
        prompts.paraphrasing(long): " ".join(["v"] * 20),
    }
    engine = scripted(outputs=outputs, batch_size=2)
    raw = helper_lm.generate_rewrites([long, short, middle], "paraphrasing", engine)
    assert generate_calls(engine) == [(2, 20), (1, 36)]  # budgets 20, 20, 36
    assert raw[0] == HelperOutput(" ".join(["v"] * 20), False)
    assert raw[1] == HelperOutput(" ".join(["x"] * 20), True)
    assert raw[2] == HelperOutput(outputs[prompts.paraphrasing(middle)], True)  # 13 >= 20 - 8 tokens: ran out


def test_cache_key_and_store(tmp_path):
    keys = {cache_key(h, k, "p", "e") for h in ("a", "b") for k in ("adding_mistakes", "paraphrasing")}
    assert len(keys) == 4 and all(re.fullmatch(r"[0-9a-f]{64}", k) for k in keys)
    store = HelperCache(tmp_path / "sub" / "h.sqlite")
    store.put([("k1", "a", "paraphrasing", "e", HelperOutput("first", True))])
    store.put([("k1", "a", "paraphrasing", "e", HelperOutput("second", False))])
    assert store.get(["k1", "k2"]) == {"k1": HelperOutput("first", True)}


def test_scores_follow_the_definition_and_a_second_run_generates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))
    metric = AddingMistakes(DEFAULT_MODEL)  # the scripted engine is its own helper
    assert METRICS.get("adding_mistakes") is AddingMistakes and metric.explanation_type == "cot"
    assert metric.variants == ("antonym-continuous", "antonym-binary")
    for run in range(2):
        engine = scripted(TABLE, OUTPUTS)
        scores = metric.score_instances(INSTANCES, engine)
        assert generate_calls(engine) == ([(3, 2 * 5 + 16)] if run == 0 else [])  # 3 distinct texts, longest 5 words
        # E1: top No 0.8 → 0.55 (still No); E2: top Yes 0.7 → 0.4 (now No); E3: unchanged rewrite → NaN.
        np.testing.assert_allclose(scores["antonym-continuous"], [0.8 - 0.55, 0.7 - 0.4, np.nan, 0.8 - 0.55])
        np.testing.assert_array_equal(scores["antonym-binary"], [0.0, 1.0, np.nan, 0.0])
    assert (tmp_path / "helper_outputs" / "helper_outputs.sqlite").is_file()


def test_another_helper_is_loaded_once_and_the_evaluated_model_generates_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))
    helper = scripted(outputs=OUTPUTS, name="other-helper")
    loaded = []
    monkeypatch.setattr(scoring, "load_model", lambda name: loaded.append(name) or helper.lm)
    monkeypatch.setattr(scoring, "ScoringEngine", lambda lm, **options: helper)
    monkeypatch.setattr(scoring, "SHARED_ENGINES", {})
    engine = scripted(TABLE)
    for _ in range(2):
        AddingMistakes("other-helper").score_instances(INSTANCES, engine)
    assert rewrite([E2, E1], "adding_mistakes", scoring.shared_engine("other-helper")) == {
        E2: "Paige plays softball.",
        E1: "Paige plays hurling, not football.",
    }
    assert loaded == ["other-helper"] and len(helper.generated) == 1 and engine.generated == []


def test_the_default_helper_is_another_packaged_model(tmp_path, monkeypatch):
    monkeypatch.setenv("CAUSALDIAG_CACHE", str(tmp_path))
    helper = scripted(outputs=OUTPUTS, name="gemma-3-270m")
    loaded = []
    monkeypatch.setattr(scoring, "load_model", lambda name: loaded.append(name) or helper.lm)
    monkeypatch.setattr(scoring, "ScoringEngine", lambda lm, **options: helper)
    monkeypatch.setattr(scoring, "SHARED_ENGINES", {})
    engine = scripted(TABLE)
    AddingMistakes().score_instances(INSTANCES, engine)
    assert loaded == ["gemma-3-270m"] and len(helper.generated) == 1 and engine.generated == []


def test_real_model_rewrites_and_scores(default_lm, factcheck_pairs, monkeypatch):
    """With the default helper (Gemma-3-270M for SmolLM2); its outputs go to the project cache (tests/conftest.py)."""
    pair = factcheck_pairs[0]
    instances = [Instance.from_pair(pair, e) for e in (pair.explanation_faithful, pair.explanation_unfaithful)]
    engine = ScoringEngine(default_lm, progress=False)
    scores = AddingMistakes().score_instances(instances, engine)
    calls = []
    for model in (engine, scoring.shared_engine("gemma-3-270m", progress=False)):
        monkeypatch.setattr(model, "generate", lambda *a, **k: calls.append(a) or [])
    again = AddingMistakes().score_instances(instances, engine)
    assert calls == []
    for variant in AddingMistakes().variants:
        np.testing.assert_array_equal(scores[variant], again[variant])
        finite = scores[variant][~np.isnan(scores[variant])]
        assert (np.abs(finite) <= 1).all()


def test_card_example_runs_offline():
    results = card_namespace("adding_mistakes")["results"]
    assert results["variant"] == "antonym-continuous" and len(results["scores"]) == 1
    assert math.isnan(results["scores"][0]) or -1 <= results["scores"][0] <= 1


@pytest.mark.parametrize("kind", sorted(helper_lm.HELPER_PROMPTS))
def test_helper_prompts_are_the_papers(kind):
    assert helper_lm.HELPER_PROMPTS[kind] is getattr(prompts, kind)

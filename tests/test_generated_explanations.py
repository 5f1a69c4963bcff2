"""Model-generated explanations (paper 000 §5.5): only pairs whose two edited models answer alike after their own CoT
are kept, with the counts of what was left out, and generations are cached on disk by model, editor and prompt."""

from __future__ import annotations

import dataclasses

import pytest
from fakes import ScriptedEngine, claim_pair

from recoe_causaldiag.generated_explanations import generation_cache, same_answer_pairs, with_generated_explanations
from recoe_causaldiag.mechanisms.helper_lm import HelperCache


def test_only_pairs_whose_models_answer_alike_are_kept():
    pairs = [claim_pair(i) for i in range(4)]
    generated = [
        pairs[0],
        pairs[1],
        dataclasses.replace(pairs[2], explanation_unfaithful=pairs[2].explanation_faithful),
        dataclasses.replace(pairs[3], explanation_unfaithful=""),
    ]
    # M̄ (the pair's own claim holds) answers "true"; M̃ answers "true" only for claim 0
    engine = ScriptedEngine(
        probs=lambda prompt: (
            [0.9, 0.1] if "does not hold" not in prompt.edits[0] or "0" in prompt.edits[0] else [0.2, 0.8]
        )
    )
    kept, counts = same_answer_pairs("factcheck", generated, engine)
    assert [p.id for p in kept] == ["factcheck-default-0"]
    assert counts == {"task": "factcheck", "n": 4, "n_kept": 1, "n_different_answers": 1, "n_unusable": 2}


def test_generations_are_cached_by_model_editor_and_prompt(tmp_path):
    cache = HelperCache(tmp_path / "generations.sqlite")
    pairs = [claim_pair(i) for i in range(2)]
    engine = ScriptedEngine(outputs=lambda prompt: f"Because {prompt.edits[0]} The best answer is: true")
    first = with_generated_explanations(pairs, engine, 16, cache)
    assert first[0].explanation_faithful == "Because Claim 0 holds." and len(engine.generated) == 1

    def fail(*args, **kwargs):
        raise AssertionError("generated again")

    engine.generate = fail
    assert with_generated_explanations(pairs, engine, 16, cache) == first
    with pytest.raises(AssertionError, match="generated again"):
        with_generated_explanations(pairs, engine, 32, cache)  # another budget is another generation
    assert generation_cache().path.name == "generations.sqlite"


def test_a_task_left_without_pairs_scores_nothing_rather_than_failing():
    from recoe_causaldiag.metrics.filler_tokens import FillerTokens

    scores = FillerTokens().score([], ScriptedEngine())
    assert scores and all(s.faithful.size == s.unfaithful.size == 0 for s in scores)

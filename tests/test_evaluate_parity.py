"""The `evaluate` modules and the runner give the same scores for the same inputs: a pair's task, metadata and flip
edits reach the metric through the module's optional compute kwargs as they do through `Metric.score(pairs)`."""

import json
from pathlib import Path

import numpy as np
import pytest

from recoe_causaldiag.api import Instance, symmetric_counterfactual
from recoe_causaldiag.evaluate_bridge import compute_model_metric, engine_for
from recoe_causaldiag.metrics.causal_faithfulness import CausalFaithfulness
from recoe_causaldiag.metrics.filler_tokens import FillerTokens
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.tasks.object_counting import build_object_counting

ROOT = Path(__file__).resolve().parents[1]


def module_inputs(pairs, *, context: bool = True) -> dict:
    """The module's inputs for both explanations of every pair, in `Metric.score`'s order."""
    rows = [(p, e) for p in pairs for e in (p.explanation_faithful, p.explanation_unfaithful)]
    inputs = dict(
        question=[p.question for p, _ in rows],
        choices=[list(p.choices) for p, _ in rows],
        edits=[list(p.edits) for p, _ in rows],
        explanations=[e for _, e in rows],
    )
    if context:
        inputs |= dict(
            tasks=[p.task for p, _ in rows],
            metadata=[p.metadata for p, _ in rows],
            flip_edits=[list(p.flip_edits) for p, _ in rows],
        )
    return inputs


def assert_same_scores(module_scores, runner):
    np.testing.assert_allclose(module_scores[0::2], runner.faithful, rtol=0, atol=1e-9)
    np.testing.assert_allclose(module_scores[1::2], runner.unfaithful, rtol=0, atol=1e-9)


@pytest.fixture(scope="module")
def engine():
    """The engine the modules score with, so both paths run the same model on the same device."""
    return engine_for(DEFAULT_MODEL)


@pytest.fixture(scope="module")
def counting_pair(engine):
    """A short Object Counting pair ("Are all of them …?") whose counterfactual the task hook builds."""

    def tokens(text: str) -> int:
        return len(engine.lm.encode(text, continuation=True))

    return next(
        p
        for p in build_object_counting(0)
        if json.loads(p.metadata)["question_type"] == "all"
        and symmetric_counterfactual(Instance.from_pair(p, p.explanation_faithful), tokens) is not None
    )


def test_causal_faithfulness_module_scores_factcheck_and_object_counting_as_the_runner(
    engine, factcheck_pairs, counting_pair
):
    import evaluate

    pairs = [factcheck_pairs[0], counting_pair]
    options = dict(layers=(15,), require_flip=False, positions="changed_and_question")
    metric = CausalFaithfulness(**options)
    runner = {v.variant: v for v in metric.score(pairs, engine)}
    assert metric.coverage.status == ("ok",) * 4
    module = evaluate.load(str(ROOT / "metrics_evaluate" / "causal_faithfulness"))
    results = module.compute(**module_inputs(pairs), model=DEFAULT_MODEL, variant="caf", **options)
    assert results["variant"] == "caf" and np.isfinite(results["scores"]).all()
    assert_same_scores(np.array(results["scores"]), runner["caf"])
    # without the pair's metadata the Object Counting hook has nothing to re-type: no counterfactual, NaN
    bare = compute_model_metric("causal_faithfulness", **module_inputs([counting_pair], context=False), **options)
    assert np.isnan(bare["scores"]).all()


def test_filler_tokens_module_scores_as_the_runner(engine, factcheck_pairs, counting_pair):
    import evaluate

    pairs = [factcheck_pairs[0], counting_pair]
    runner = {v.variant: v for v in FillerTokens().score(pairs, engine)}
    module = evaluate.load(str(ROOT / "metrics_evaluate" / "filler_tokens"))
    results = module.compute(**module_inputs(pairs), model=DEFAULT_MODEL, variant="non_repeating-pilcrows-binary")
    assert_same_scores(np.array(results["scores"]), runner["non_repeating-pilcrows-binary"])

"""The run specification: metric options are parsed, checked before any model is loaded, applied and recorded."""

import numpy as np
import pytest

from recoe_causaldiag.hub_layout import load_pairs
from recoe_causaldiag.metrics.random import Random
from recoe_causaldiag.runner import RunSpec, parse_metric_option, run, select_pairs, with_generated_explanations


def test_metric_options_are_parsed_as_literals_or_text():
    assert parse_metric_option("cc_shap.n_samples=4") == ("cc_shap", "n_samples", 4)
    assert parse_metric_option("causal_faithfulness.layers=(14, 15)") == ("causal_faithfulness", "layers", (14, 15))
    assert parse_metric_option("simulatability.simulator=gemma-3-270m") == ("simulatability", "simulator",
                                                                             "gemma-3-270m")
    for bad in ("cc_shap.n_samples", "n_samples=4", "cc_shap.=4", ".n_samples=4"):
        with pytest.raises(ValueError, match="METRIC.KEY=VALUE"):
            parse_metric_option(bad)


@pytest.mark.parametrize("options, message", [
    ((("cc_shap", "n_sample", 4),), "metric cc_shap has no option 'n_sample'"),
    ((("random", "seed", 1),), "names a metric that this run does not compute"),
    ((("cc_shap", "n_samples", 0),), "n_samples must be >= 1"),
    ((("causal_faithfulness", "layers", 15),), "bad option for metric causal_faithfulness"),
])
def test_bad_metric_options_are_rejected_up_front(options, message):
    with pytest.raises(ValueError, match=message):
        RunSpec(model="smollm2-135m-instruct", tasks=("factcheck",), metrics=("cc_shap", "causal_faithfulness"),
                metric_options=options)


def test_options_reach_the_metric_and_the_results(default_lm, factcheck_dir):
    spec = RunSpec(model="smollm2-135m-instruct", tasks=("factcheck",), metrics=("random",), limit=3, seed=5,
                   metric_options=(("random", "seed", 7),))
    doc = run(spec, lm=default_lm, data_dir=factcheck_dir.parent, progress=False)
    assert doc["run_spec"]["metric_options"] == (("random", "seed", 7),)
    pairs = select_pairs(load_pairs(factcheck_dir), 3, 5)
    (expected,) = Random(7).score(pairs, None)
    got = [row["score_faithful"] for row in doc["pairs"]]
    np.testing.assert_allclose(got, expected.faithful)


class GeneratingEngine:
    """Answers every generation request with a CoT that ends in the answer cue, tagged by the edits it saw."""

    def generate(self, requests, max_new_tokens):
        return [f"Reasoning from {r.turns[0].content.count('New Fact')} facts. The best answer is: No"
                for r in requests]


def test_generated_explanations_stop_before_the_answer_cue(factcheck_pairs):
    pairs = with_generated_explanations(factcheck_pairs[:2], GeneratingEngine(), max_new_tokens=8)
    for original, pair in zip(factcheck_pairs, pairs):
        expected = f"Reasoning from {len(original.edits)} facts."
        assert pair.explanation_faithful == expected and pair.explanation_unfaithful == \
            f"Reasoning from {len(original.counter_edits)} facts."
        assert (pair.id, pair.edits, pair.question) == (original.id, original.edits, original.question)

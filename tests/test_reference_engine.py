"""The engine against the reference loop of the papers' code (`ReferenceEngine`: batch 1, the whole prompt per
forward, no prefix reuse, no memo): every metric that scores with the model gives the same numbers on both, on the
same pairs (issue 16: a speed-up must not change a metric's estimate)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from fakes import random_llama

from recoe_causaldiag import scoring
from recoe_causaldiag.api import Instance
from recoe_causaldiag.mechanisms.activation_patching import Ending, Patch, residual_stream
from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.metrics.causal_faithfulness import prepare
from recoe_causaldiag.models import LanguageModel, load_model
from recoe_causaldiag.packaged_models import default_helper_model
from recoe_causaldiag.reference_engine import ReferenceEngine
from recoe_causaldiag.scoring import ScoringEngine

OPTIONS = {
    "cc_shap": {"n_samples": 1, "long_question_samples": 1, "select": ("post_hoc",)},
    "causal_faithfulness": {"layers": (20,), "positions": "changed_and_question", "require_flip": False},
}
"""Budgets that keep the reference loop short; both paths run with the same options."""
TOLERANCE = {"causal_faithfulness": 1e-3}
"""float32 sums differ with batch shape, padding and KV reuse, by about 1e-6 in a probability; scores are differences
of probabilities, except CaF's, a cosine of effect matrices whose cells are themselves small differences of
probabilities (2e-4 seen)."""


PATHS = ("engine", "reference")


def scores_on(path: str, lm: LanguageModel, name: str, options: dict, pairs: list) -> dict[str, np.ndarray]:
    """Each variant's scores (faithful then unfaithful explanations) of one metric on the engine or the reference loop,
    CaF patching one forward per patch on the latter."""
    engine = ScoringEngine(lm, progress=False) if path == "engine" else ReferenceEngine(lm)
    metric = METRICS.get(name)(**options)
    return {s.variant: np.concatenate([s.faithful, s.unfaithful]) for s in metric.score(pairs, engine)}


@pytest.fixture(scope="module")
def helper_engines():
    """The default helper model (simulator, helper LM) on each path, as the metric would find it."""
    helper = default_helper_model("smollm2-135m-instruct")
    lm = load_model(helper, device="cpu")
    return {"engine": ScoringEngine(lm, progress=False), "reference": ReferenceEngine(lm)}


@pytest.mark.parametrize("name", [name for name in METRICS.names() if METRICS.get(name).uses_model])
def test_every_model_metric_scores_alike_on_the_engine_and_the_reference_loop(
    name, default_lm, factcheck_pairs, helper_engines, monkeypatch
):
    helpers = helper_engines
    pairs = factcheck_pairs[:1]
    scores = {}
    monkeypatch.setattr(scoring, "SHARED_ENGINES", {})
    for path in PATHS:
        scoring.share_engine(helpers[path])
        scores[path] = scores_on(path, default_lm, name, OPTIONS.get(name, {}), pairs)
    for variant, fast in scores["engine"].items():
        slow = scores["reference"][variant]
        np.testing.assert_array_equal(np.isnan(fast), np.isnan(slow), err_msg=f"{name}/{variant}: NaN pattern")
        np.testing.assert_allclose(fast, slow, atol=TOLERANCE.get(name, 1e-4), rtol=0, err_msg=f"{name}/{variant}")


def test_the_reference_loop_runs_every_prompt_whole_and_alone(default_lm, factcheck_pairs, monkeypatch):
    """What the bench and the test above compare against: one forward per prompt, batch 1, no KV cache, whatever
    the engine it derives from would batch, cache or pack."""
    from recoe_causaldiag import prompts
    from recoe_causaldiag.api import LabelRequest

    pair = factcheck_pairs[0]
    texts = (pair.explanation_faithful, pair.explanation_faithful + " Hence no.", "")
    requests = [LabelRequest(prompts.cot(pair.edits, pair.question, text), pair.choices) for text in texts]
    forwards, forward = [], default_lm.model.forward

    def recording(*args, **kwargs):
        assert kwargs.get("past_key_values") is None and kwargs.get("attention_mask") is None
        forwards.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(default_lm.model, "forward", recording)
    reference = ReferenceEngine(default_lm)
    reference.label_probs(requests)
    reference.perplexity([r.prompt for r in requests[:2]])
    encoded = [reference.encode(r.prompt) for r in requests]
    assert forwards == [(1, len(e.prefix) + len(e.continuation)) for e in encoded + encoded[:2]]


def test_the_reference_loop_patches_one_whole_input_per_forward(default_lm, monkeypatch):
    """CaF's patched runs on the reference engine: for every patch and every ending, one forward of the whole input
    (stem and ending), batch 1, no KV cache; the read-outs are the engine's."""
    stem = tuple(default_lm.tokenizer.encode("The capital of France is Paris. Is that true?"))
    endings = [
        Ending(tokens, (len(stem) - 1, len(stem)), lambda logits: logits[:, :, :5]) for tokens in ((11,), (12, 13))
    ]
    patches = [Patch((), ()), Patch((1,), (0,)), Patch((2, 3), (4, 5))]
    source = residual_stream(default_lm.model, stem[::-1])
    engine = ScoringEngine(default_lm, progress=False).patched_readouts(
        stem, stem, patches, endings, source_states=source
    )
    forwards, forward = [], default_lm.model.forward

    def recording(*args, **kwargs):
        assert kwargs.get("past_key_values") is None and kwargs.get("attention_mask") is None
        forwards.append(tuple((args[0] if args else kwargs["input_ids"]).shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(default_lm.model, "forward", recording)
    reference = ReferenceEngine(default_lm).patched_readouts(stem, stem, patches, endings, source_states=source)
    assert forwards == [(1, len(stem) + len(e.tokens)) for _ in patches for e in endings]
    assert reference.shape == engine.shape == (len(patches), len(endings), 2, 5)
    torch.testing.assert_close(reference, engine, atol=1e-3, rtol=1e-3)


def test_caf_engine_equals_its_reference_loop_in_float64(default_lm, factcheck_pairs):
    """In float64 CaF's engine (patches stacked along the batch, the two explanations branching after their shared
    stem, the KV cache reused before the first patched position) and the reference loop (one forward per patch) agree
    to rounding; the float32 gap the tolerance above allows is float32's (bench/caf_rounding.py, README)."""
    tiny = random_llama(default_lm, layers=3, init_std=0.5)
    lm = dataclasses.replace(tiny, model=tiny.model.double())
    options = {"layers": (0, 2), "require_flip": False}
    finder = ScoringEngine(lm, progress=False)
    pairs = [next(p for p in factcheck_pairs if patchable(finder, p))]
    scores = {path: scores_on(path, lm, "causal_faithfulness", options, pairs) for path in PATHS}
    for variant, fast in scores["engine"].items():
        assert np.isfinite(fast).all(), f"{variant}: an explanation was not patched"
        np.testing.assert_allclose(fast, scores["reference"][variant], atol=1e-9, rtol=0, err_msg=variant)


def patchable(engine: ScoringEngine, pair) -> bool:
    """Whether CaF can patch both explanations of the pair without requiring a flipped answer."""
    instances = [Instance.from_pair(pair, e) for e in (pair.explanation_faithful, pair.explanation_unfaithful)]
    return all(prepare(engine, i, 0, require_flip=False)[1] is not None for i in instances)


def test_the_bench_reference_path_serves_the_helper_through_the_reference_loop(monkeypatch):
    """`make bench` times a helper metric's reference path with its helper on the reference loop too, under the key
    the metric looks its helper up by (the engines there show no progress bars)."""
    path = Path(__file__).parents[1] / "bench" / "bench_metrics.py"
    spec = importlib.util.spec_from_file_location("bench_metrics", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(scoring, "SHARED_ENGINES", {})
    found = bench.worker("simulatability", "reference", 1, "smollm2-135m-instruct", False, {})
    assert found["pairs"] == 1 and found["flops"] > 0
    helper = default_helper_model("smollm2-135m-instruct")
    assert {key: type(engine) for key, engine in scoring.SHARED_ENGINES.items()} == {(helper, False): ReferenceEngine}

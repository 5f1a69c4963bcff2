import numpy as np
import pytest
import torch

from recoe_causaldiag import prompts
from recoe_causaldiag.kv_cache import forked_cache
from recoe_causaldiag.mechanisms.truncation import heuristic_truncation
from recoe_causaldiag.metrics.filler_tokens import CORRUPTIONS
from recoe_causaldiag.scoring import LabelRequest, ScoringEngine, naive_label_probs

LENGTHY = {"repeating-dollars", "repeating-dashes", "non_repeating-pilcrows"}


@pytest.fixture(scope="module")
def requests_(factcheck_pairs):
    """Explanation variants of very different lengths for two pairs, plus a direct question."""
    out = []
    for pair in factcheck_pairs[:2]:
        for explanation in (pair.explanation_faithful, pair.explanation_unfaithful):
            variants = [explanation, heuristic_truncation(explanation), ""] + [
                c.apply(explanation) for c in CORRUPTIONS if c.name in LENGTHY
            ]
            out += [LabelRequest(prompts.cot(pair.edits, pair.question, v), pair.choices) for v in variants]
    out.append(LabelRequest(prompts.direct(factcheck_pairs[0].edits, factcheck_pairs[0].question), ("Yes", "No")))
    return out


@pytest.fixture(scope="module")
def reference(default_lm, requests_):
    return np.stack(naive_label_probs(default_lm, requests_))


@pytest.mark.parametrize("batch_size, max_batch_tokens", [(1, 8192), (5, 600), (32, 8192)])
def test_batched_cached_scores_equal_unbatched_uncached(default_lm, requests_, reference, batch_size, max_batch_tokens):
    engine = ScoringEngine(default_lm, batch_size=batch_size, max_batch_tokens=max_batch_tokens, progress=False)
    batched = np.stack(engine.label_probs(requests_))
    assert batched.shape == (len(requests_), 2)
    np.testing.assert_allclose(batched.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(batched, reference, atol=1e-4, rtol=0)


def test_prefix_is_encoded_once_per_window(default_lm, requests_):
    calls = []
    forward = default_lm.model.forward

    def counting(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape)
        return forward(*args, **kwargs)

    default_lm.model.forward = counting
    try:
        ScoringEngine(default_lm, batch_size=64, progress=False).label_probs(requests_)
    finally:
        default_lm.model.forward = forward
    prefixes = {ScoringEngine(default_lm).encode(r.prompt).prefix for r in requests_}
    assert calls[0][0] == len(prefixes)
    assert sum(shape[0] for shape in calls[1:]) == len(
        {(r.prompt.continuation, r.prompt.turns) for r in requests_ if r.prompt.continuation}
    )


def test_continuation_logprobs_match_a_full_forward(default_lm, factcheck_pairs):
    pair = factcheck_pairs[0]
    prompts_ = [
        prompts.cot_explanation(pair.edits, pair.question, e)
        for e in (pair.explanation_faithful, pair.explanation_unfaithful, "...")
    ]
    engine = ScoringEngine(default_lm, batch_size=2, progress=False)
    got = engine.continuation_logprobs(prompts_)
    for prompt, logprobs in zip(prompts_, got):
        encoded = engine.encode(prompt)
        ids = torch.tensor([encoded.prefix + encoded.continuation])
        with torch.inference_mode():
            full = torch.log_softmax(default_lm.model(input_ids=ids).logits[0].double(), dim=-1)
        start = len(encoded.prefix)
        expected = full[start - 1 : -1].gather(1, torch.tensor(encoded.continuation)[:, None])[:, 0].numpy()
        assert logprobs.shape == (len(encoded.continuation),)
        np.testing.assert_allclose(logprobs, expected, atol=1e-4)
    ppl = engine.perplexity(prompts_)
    np.testing.assert_allclose(ppl, [np.exp(-lp.mean()) for lp in got])


def test_passes_that_keep_every_positions_logits_hold_at_most_max_logit_tokens(default_lm, factcheck_pairs):
    """A log-prob pass keeps a vocabulary of logits per continuation token, so its batches are bounded by
    `max_logit_tokens` (memory), while label passes keep `max_batch_tokens`; the log-probs do not change."""
    prompts_ = [
        prompts.cot_explanation(p.edits, p.question, e)
        for p in factcheck_pairs[:4]
        for e in (p.explanation_faithful, p.explanation_unfaithful)
    ]
    shapes = []
    forward = default_lm.model.forward

    def recording(*args, **kwargs):
        if kwargs.get("past_key_values") is not None:
            shapes.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    wide = ScoringEngine(default_lm, progress=False).continuation_logprobs(prompts_)
    default_lm.model.forward = recording
    try:
        narrow = ScoringEngine(default_lm, max_logit_tokens=48, progress=False).continuation_logprobs(prompts_)
    finally:
        default_lm.model.forward = forward
    assert len(shapes) > 1 and all(rows * width <= 48 or rows == 1 for rows, width in shapes)
    for a, b in zip(wide, narrow, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-4)  # fp32 sums over other batch shapes


def test_greedy_generation_is_deterministic(default_lm, factcheck_pairs):
    engine = ScoringEngine(default_lm, batch_size=4, progress=False)
    requests = [prompts.cot_generation(p.edits, p.question) for p in factcheck_pairs[:3]]
    first = engine.generate(requests, max_new_tokens=12)
    assert first == engine.generate(requests, max_new_tokens=12)
    assert all(isinstance(t, str) and t for t in first)
    alone = engine.generate(requests[:1], max_new_tokens=12)
    assert alone[0].split()[:3] == first[0].split()[:3]


def test_a_forked_cache_extends_without_touching_the_prefix_cache(default_lm):
    model = default_lm.model
    texts = ("The capital of France is", "Bananas are very ripe and")
    prefix = torch.tensor([default_lm.encode(text, continuation=True)[:4] for text in texts])
    with torch.inference_mode():
        cache = model(prefix, use_cache=True).past_key_values
        before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        fork = forked_cache(cache, torch.tensor([1, 1, 0]))
        out = model(torch.tensor([[13], [11], [13]]), past_key_values=fork, use_cache=True).logits[:, -1]
        alone = model(torch.cat([prefix[1], torch.tensor([11])])[None]).logits[:, -1]
    assert fork.get_seq_length() == prefix.shape[1] + 1 and cache.get_seq_length() == prefix.shape[1]
    assert all(
        torch.equal(k, layer.keys) and torch.equal(v, layer.values) for (k, v), layer in zip(before, cache.layers)
    )
    torch.testing.assert_close(out[1], alone[0], atol=1e-4, rtol=0)

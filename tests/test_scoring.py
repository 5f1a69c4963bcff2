import os
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaForCausalLM
from transformers.cache_utils import DynamicSlidingWindowLayer

from recoe_causaldiag import prompts, scoring
from recoe_causaldiag.kv_cache import forked_cache, prefix_cache
from recoe_causaldiag.mechanisms.truncation import heuristic_truncation
from recoe_causaldiag.metrics.filler_tokens import CORRUPTIONS
from recoe_causaldiag.models import LanguageModel
from recoe_causaldiag.scoring import BATCH_LIMITS, Encoded, LabelRequest, ScoringEngine, naive_label_probs

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


def resident_mb() -> float:
    """This process's resident memory in MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.fixture(scope="module")
def reference(default_lm, requests_):
    return np.stack(naive_label_probs(default_lm, requests_))


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("batch_size, max_batch_tokens", [(1, 8192), (5, 600), (32, 8192)])
def test_batched_cached_scores_equal_unbatched_uncached(
    default_lm, requests_, reference, batch_size, max_batch_tokens, pack
):
    engine = ScoringEngine(
        default_lm, batch_size=batch_size, max_batch_tokens=max_batch_tokens, pack=pack, progress=False
    )
    batched = np.stack(engine.label_probs(requests_))
    assert batched.shape == (len(requests_), 2)
    np.testing.assert_allclose(batched.sum(axis=1), 1.0, atol=1e-9)
    np.testing.assert_allclose(batched, reference, atol=1e-4, rtol=0)


def test_prefix_is_encoded_once_per_window_after_their_shared_beginning(default_lm, requests_):
    calls = []
    forward = default_lm.model.forward

    def counting(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape)
        return forward(*args, **kwargs)

    default_lm.model.forward = counting
    try:
        ScoringEngine(default_lm, batch_size=64, max_prefix_tokens=10**6, pack=False, progress=False).label_probs(
            requests_
        )
    finally:
        default_lm.model.forward = forward
    prefixes = sorted({ScoringEngine(default_lm).encode(r.prompt).prefix for r in requests_}, key=len, reverse=True)
    head = scoring.shared_head(prefixes)
    assert len(prefixes) > 1 and len(head) > 10
    assert calls[0] == (1, len(head))
    assert calls[1] == (len(prefixes), max(len(p) for p in prefixes) - len(head))
    assert sum(shape[0] for shape in calls[2:]) == len(
        {(r.prompt.continuation, r.prompt.turns) for r in requests_ if r.prompt.continuation}
    )


@pytest.mark.parametrize(
    "prefixes, head",
    [
        ([(1, 2, 3, 4), (1, 2, 3, 5, 6), (1, 2, 7)], (1, 2)),
        ([(1, 2, 3), (1, 2, 3, 4)], (1, 2)),
        ([(1, 2, 3), (4, 2, 3)], ()),
        ([(1, 2, 3)], ()),
    ],
)
def test_the_shared_head_is_what_all_prefixes_begin_with_short_of_the_shortest_ones_last_token(prefixes, head):
    assert scoring.shared_head(prefixes) == head


def test_prefixes_with_a_shared_head_score_as_whole_prompts_do(default_lm, factcheck_pairs):
    """Direct prompts whose edits differ after the first (CCT's interventions): left-padded rests after a head of
    several tokens, against one whole prompt per forward."""
    pair = factcheck_pairs[0]
    requests = [
        LabelRequest(prompts.direct(edits, pair.question), pair.choices)
        for edits in (pair.edits, pair.edits[:1], (pair.edits[0], "Paris is in France.", *pair.edits[1:]))
    ]
    engine = ScoringEngine(default_lm, progress=False)
    assert len(scoring.shared_head([engine.encode(r.prompt).prefix for r in requests])) > 10
    np.testing.assert_allclose(
        np.stack(engine.label_probs(requests)), np.stack(naive_label_probs(default_lm, requests)), atol=1e-4, rtol=0
    )


def test_a_window_holds_at_most_max_prefix_tokens_of_padded_prefixes(default_lm, requests_, reference, monkeypatch):
    widths = []
    forward = default_lm.model.forward

    def recording(*args, **kwargs):
        if kwargs.get("past_key_values") is None:
            widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    longest = max(len(ScoringEngine(default_lm).encode(r.prompt).prefix) for r in requests_)
    engine = ScoringEngine(default_lm, max_prefix_tokens=longest + 1, progress=False)
    monkeypatch.setattr(default_lm.model, "forward", recording)
    probs = np.stack(engine.label_probs(requests_))
    assert len(widths) > 1 and all(rows == 1 for rows, _ in widths)
    np.testing.assert_allclose(probs, reference, atol=1e-4, rtol=0)


def test_the_token_limits_default_to_the_devices(default_lm):
    engine = ScoringEngine(default_lm, max_logit_tokens=7)
    cpu = BATCH_LIMITS["cpu"]
    assert (engine.max_batch_tokens, engine.max_logit_tokens, engine.max_prefix_tokens) == (cpu.batch, 7, cpu.prefix)


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
    `max_logit_tokens` (memory); the log-probs do not change."""
    prompts_ = [
        prompts.cot_explanation(p.edits, p.question, e)
        for p in factcheck_pairs[:4]
        for e in (p.explanation_faithful, p.explanation_unfaithful)
    ]
    shapes = []
    forward = default_lm.model.forward

    def recording(*args, **kwargs):
        if kwargs.get("use_cache") is False:  # a continuation pass, not a prefix's
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


def test_a_forked_cache_reads_its_rows_and_keeps_neither_the_prefix_cache_nor_itself_changed(default_lm):
    model = default_lm.model
    texts = ("The capital of France is", "Bananas are very ripe and")
    prefix = torch.tensor([default_lm.encode(text, continuation=True)[:4] for text in texts])
    with torch.inference_mode():
        cache = model(prefix, use_cache=True).past_key_values
        before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        fork = forked_cache(cache, torch.tensor([1, 1, 0]))
        continuation = torch.tensor([[13], [11], [13]])
        out = model(continuation, past_key_values=fork, use_cache=True).logits[:, -1]
        again = model(continuation, past_key_values=fork, use_cache=True).logits[:, -1]
        alone = model(torch.cat([prefix[1], torch.tensor([11])])[None]).logits[:, -1]
    assert fork.get_seq_length() == cache.get_seq_length() == prefix.shape[1]
    assert all(
        torch.equal(k, layer.keys) and torch.equal(v, layer.values) for (k, v), layer in zip(before, cache.layers)
    )
    assert all(fork_layer.keys is layer.keys for fork_layer, layer in zip(fork.layers, cache.layers))
    torch.testing.assert_close(out[1], alone[0], atol=1e-4, rtol=0)
    assert torch.equal(out, again)


def test_a_forked_sliding_window_cache_reads_as_the_whole_sequence_does():
    config = Gemma3TextConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=4,
        layer_types=["sliding_attention", "full_attention"],
    )
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).eval()
    tokens = torch.randint(1, 64, (2, 9))
    with torch.inference_mode():
        cache = model(tokens[:, :6], use_cache=True).past_key_values
        assert any(isinstance(layer, DynamicSlidingWindowLayer) for layer in cache.layers)
        fork = forked_cache(cache, torch.tensor([1, 0, 1]))
        out = model(tokens[[1, 0, 1], 6:], past_key_values=fork, use_cache=False).logits
        whole = model(tokens[[1, 0, 1]]).logits[:, 6:]
    torch.testing.assert_close(out, whole, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["llama", "gemma3"])
def test_a_prefix_cache_reads_as_its_first_positions_alone_do_and_is_none_once_a_sliding_window_moved_past(kind):
    config = tiny_config(kind)
    if kind == "gemma3":
        config.sliding_window = 6
    torch.manual_seed(0)
    model = (Gemma3ForCausalLM if kind == "gemma3" else LlamaForCausalLM)(config).eval()
    tokens = torch.randint(1, 64, (1, 9))
    with torch.inference_mode():
        cache = model(tokens[:, :5], use_cache=True).past_key_values
        before = [layer.keys for layer in cache.layers]
        prefix = prefix_cache(cache, 3)
        out = model(tokens[:, 3:], past_key_values=prefix, use_cache=False).logits
        whole = model(tokens).logits[:, 3:]
        longer = model(tokens, use_cache=True).past_key_values
    torch.testing.assert_close(out, whole, atol=1e-5, rtol=0)
    assert cache.get_seq_length() == 5 and all(layer.keys is k for layer, k in zip(cache.layers, before, strict=True))
    assert all(
        layer.keys.untyped_storage().data_ptr() == k.untyped_storage().data_ptr()
        for layer, k in zip(prefix_cache(cache, 2).layers, before, strict=True)
    )  # a view of the cache, not a copy
    with pytest.raises(ValueError, match="no prefix of 6"):
        prefix_cache(cache, 6)
    # 9 positions through a window of 6: the sliding layer no longer holds the first ones
    assert (prefix_cache(longer, 3) is None) == (kind == "gemma3")


@pytest.mark.skipif(scoring._MALLOC_TRIM is None, reason="the C library has no malloc_trim (not glibc)")
def test_memory_that_freed_tensors_leave_in_the_heap_goes_back_to_the_system():
    mapped = torch.ones(8 * 2**20 // 4)
    del mapped  # freeing an 8 MB mapping makes glibc serve smaller blocks from the heap from now on
    blocks, kept = [], []
    for _ in range(120):  # 1 MB blocks, each followed by one that stays: freed, they cannot merge nor leave the top
        blocks.append(torch.ones(2**20 // 4))
        kept.append(torch.ones(2**20 // 4))
    del blocks
    scattered = resident_mb()
    scoring.release_freed_memory()
    assert scattered - resident_mb() > 60 and len(kept) == 120


def test_the_engine_hands_freed_memory_back_after_every_batch(default_lm, requests_, monkeypatch):
    released, batches = [], []
    forward = default_lm.model.forward

    def recording(*args, **kwargs):
        if kwargs.get("use_cache") is False:  # a continuation pass, not a prefix's
            batches.append(len(released))
        return forward(*args, **kwargs)

    monkeypatch.setattr(scoring, "release_freed_memory", lambda: released.append(1))
    monkeypatch.setattr(default_lm.model, "forward", recording)
    ScoringEngine(default_lm, max_batch_tokens=600, progress=False).label_probs(requests_)
    assert len(batches) > 1 and batches == list(range(len(batches))) and len(released) == len(batches)


@pytest.mark.parametrize("pack", [True, False])
def test_label_scoring_keeps_no_batch_of_logits_once_the_next_one_is_computed(default_lm, requests_, pack, monkeypatch):
    """A batch's logits hold a vocabulary per request (196 KB for SmolLM2): label scoring keeps the label tokens'
    probabilities of each and lets the batch go, so memory does not grow with the number of requests. Here every
    continuation pass's logits are widened to 8 MB a row, so that a batch kept alive shows in the process's RSS."""
    forward, resident, rows = default_lm.model.forward, [], []

    def widened(*args, **kwargs):
        out = forward(*args, **kwargs)
        if kwargs.get("use_cache") is False:  # a continuation pass, not a prefix's
            wide = torch.zeros(*out.logits.shape[:2], 2**21)
            wide[..., : out.logits.shape[-1]] = out.logits
            out.logits = wide
            resident.append(resident_mb())
            rows.append(wide.shape[0] * wide.shape[1])
        return out

    expected = ScoringEngine(default_lm, pack=pack, progress=False).label_probs(requests_)
    monkeypatch.setattr(default_lm.model, "forward", widened)
    engine = ScoringEngine(default_lm, batch_size=2, pack=pack, progress=False)
    engine.max_packed_tokens = 16
    probs = engine.label_probs(requests_)
    np.testing.assert_allclose(probs, expected, atol=1e-4, rtol=0)
    two_batches = 8 * 2 * max(rows)
    assert sum(rows) * 8 > 2 * two_batches  # keeping every batch would hold more than twice the bound below
    assert max(resident) - resident[0] < two_batches


def filler_requests(pairs) -> list[LabelRequest]:
    """Every Filler Tokens prompt of `pairs`' two explanations: fillers of one explanation begin those of the other."""
    return [
        LabelRequest(prompts.cot(pair.edits, pair.question, variant), pair.choices)
        for pair in pairs
        for explanation in (pair.explanation_faithful, pair.explanation_unfaithful)
        for variant in (explanation, *(c.apply(explanation) for c in CORRUPTIONS))
    ]


def test_packed_rows_run_a_beginning_that_continuations_share_once(default_lm, factcheck_pairs, monkeypatch):
    requests = filler_requests(factcheck_pairs[:3])
    positions = {True: 0, False: 0}
    forward, packing = default_lm.model.forward, [True]

    def counting(*args, **kwargs):
        if kwargs.get("use_cache") is False:
            positions[packing[0]] += kwargs["input_ids"].numel()
            assert kwargs["attention_mask"].dim() == (4 if packing[0] else 2)
        return forward(*args, **kwargs)

    monkeypatch.setattr(default_lm.model, "forward", counting)
    packed = np.stack(ScoringEngine(default_lm, progress=False).label_probs(requests))
    packing[0] = False
    unpacked = np.stack(ScoringEngine(default_lm, pack=False, progress=False).label_probs(requests))
    np.testing.assert_allclose(packed, unpacked, atol=1e-5, rtol=0)
    engine = ScoringEngine(default_lm, progress=False)
    tokens = sum(len(e.continuation) for e in dict.fromkeys(engine.encode(r.prompt) for r in requests))
    assert positions[True] < 0.8 * tokens <= positions[False]


def tiny_config(kind: str, attention: str = "sdpa"):
    """A two-layer model config of `kind`: llama or qwen2 (full attention), gemma3 (one sliding-window layer; also
    inside a multimodal config, as a Gemma 3 hub id loads), mistral (a sliding window and no layer types) or a
    chunked-attention layer (as Llama 4 has)."""
    from transformers import Gemma3Config, LlamaConfig, MistralConfig, Qwen2Config

    sizes = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    sizes |= {"num_attention_heads": 2, "num_key_value_heads": 1}
    gemma3 = {**sizes, "head_dim": 16, "layer_types": ["sliding_attention", "full_attention"]}
    config = {
        "llama": lambda: LlamaConfig(**sizes),
        "qwen2": lambda: Qwen2Config(**sizes),
        "gemma3": lambda: Gemma3TextConfig(**gemma3),
        "gemma3-multimodal": lambda: Gemma3Config(text_config=gemma3),
        "mistral": lambda: MistralConfig(**sizes, sliding_window=16),
        "chunked": lambda: LlamaConfig(**sizes, layer_types=["full_attention", "chunked_attention"]),
    }[kind]()
    config._attn_implementation = attention
    return config


@pytest.mark.parametrize(
    "kind, attention, packs",
    [
        ("llama", "sdpa", True),
        ("llama", "eager", True),
        ("qwen2", "sdpa", True),
        ("llama", "flex_attention", False),
        ("gemma3", "sdpa", False),
        ("gemma3-multimodal", "sdpa", False),
        ("mistral", "sdpa", False),
        ("chunked", "sdpa", False),
    ],
)
def test_rows_are_packed_only_where_the_model_takes_the_mask_as_given(kind, attention, packs):
    model = torch.nn.Module()
    model.config = tiny_config(kind, attention)
    assert scoring.accepts_packed_rows(model) is packs


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packed_rows_of_several_lengths_in_one_batch_equal_the_unpacked_path(default_lm, attention, monkeypatch):
    """A tiny random Llama in both attention implementations that take the mask as given: rows of different lengths
    right-padded into one forward, under prefixes of different lengths left-padded in one window."""
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_config("llama", attention)).eval()
    lm = LanguageModel("tiny-llama", "test", model, default_lm.tokenizer, chat=True)
    encoded = [
        Encoded((5, 6, 7, 8, 9), (20, 21, 22, 23, 24, 25), True),
        Encoded((5, 6, 7, 8, 9), (20, 21, 22, 30), True),
        Encoded((5, 6, 7, 8, 9), (20, 21), True),
        Encoded((5, 6, 7, 8, 9), (40,), True),
        Encoded((5, 6, 11), (20, 21, 22, 23), True),
        Encoded((5, 6, 11), (20, 21, 22, 23), True),
        Encoded((5, 6, 11), (), True),
    ]
    widths, forward = [], model.forward

    def recording(*args, **kwargs):
        if kwargs.get("use_cache") is False:
            widths.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", recording)
    packed = dict(ScoringEngine(lm, progress=False)._last_logits(encoded, desc="packed"))
    assert widths == [(2, 8)]  # the rows of 8 and 4 tokens, in one forward
    unpacked = dict(ScoringEngine(lm, pack=False, progress=False)._last_logits(encoded, desc="unpacked"))
    assert sorted(packed) == sorted(unpacked) == list(range(len(encoded)))
    for index in unpacked:
        torch.testing.assert_close(packed[index], unpacked[index], atol=1e-5, rtol=0)


def test_the_default_model_packs_rows_and_a_sliding_window_model_does_not(default_lm):
    assert ScoringEngine(default_lm).packs and not ScoringEngine(default_lm, pack=False).packs
    gemma = Gemma3ForCausalLM(tiny_config("gemma3")).eval()
    assert not ScoringEngine(LanguageModel("tiny-gemma", "test", gemma, default_lm.tokenizer, chat=True)).packs


def stemmed_requests(lm) -> list[Encoded]:
    """Continuations under two prefixes: two that share a long beginning, one that is another's beginning, one
    identical to another, and one that shares nothing."""
    head = tuple(lm.encode("Some facts come first. Then the question", continuation=True))
    other = tuple(lm.encode("A different system turn, longer than the first one is", continuation=True))
    shared = tuple(lm.encode(" Is Paris the capital of France? Answer: yes, because", continuation=True))
    ending_a = tuple(lm.encode(" the facts say so.", continuation=True))
    ending_b = tuple(lm.encode(" it is well known to everyone.", continuation=True))
    lone = tuple(lm.encode(" Bananas are yellow.", continuation=True))
    return [
        Encoded(head, shared + ending_a, True),
        Encoded(head, shared + ending_b, True),
        Encoded(head, lone, True),
        Encoded(other, shared + ending_a, True),
        Encoded(other, shared + ending_a, True),
        Encoded(other, shared, True),
    ]


def assert_rows_equal_a_full_forward(lm, encoded, rows, got) -> None:
    """Each request's logits `got[index]` at its continuation `rows[index]` equal those of one forward over the whole
    prompt, on the model's device."""
    with torch.inference_mode():
        for index, request in enumerate(encoded):
            ids = torch.tensor([request.prefix + request.continuation], device=lm.model.device)
            whole = lm.model(ids).logits[0, len(request.prefix) :].float().cpu()
            torch.testing.assert_close(got[index], whole[rows[index]], atol=1e-4, rtol=0)


@pytest.mark.parametrize("pack", [True, False])
@pytest.mark.parametrize("max_batch_tokens, max_logit_tokens", [(2048, 256), (40, 4)])
def test_continuation_logits_at_the_rows_asked_equal_a_full_forward(
    default_lm, pack, max_batch_tokens, max_logit_tokens
):
    encoded = stemmed_requests(default_lm)
    generator = np.random.default_rng(0)
    rows = [sorted(generator.choice(len(e.continuation), size=3, replace=False).tolist()) for e in encoded]
    rows[1] = [len(encoded[1].continuation) - 1, 0]
    engine = ScoringEngine(
        default_lm, max_batch_tokens=max_batch_tokens, max_logit_tokens=max_logit_tokens, pack=pack, progress=False
    )
    got = dict(engine.continuation_logits(encoded, rows=rows))
    assert sorted(got) == list(range(len(encoded)))
    assert_rows_equal_a_full_forward(default_lm, encoded, rows, got)
    everything = dict(engine.continuation_logits(encoded[:2]))
    assert [everything[i].shape[0] for i in range(2)] == [len(e.continuation) for e in encoded[:2]]


def two_branches(lm) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """A prefix, a shared beginning and two endings of equal length, as token ids."""
    head, shared, a, b = (
        tuple(lm.encode(text, continuation=True))
        for text in ("Facts first.", " Is Paris the capital of France? Yes, since", " the facts say", " it is known")
    )
    assert len(a) == len(b)
    return head, shared, a, b


def test_packed_continuations_run_their_shared_beginning_and_each_read_row_once(default_lm):
    head, shared, a, b = two_branches(default_lm)
    encoded = [Encoded(head, shared + a, True), Encoded(head, shared + b, True)]
    positions, heads = [], []
    hooks = [
        default_lm.model.get_decoder().register_forward_pre_hook(
            lambda _, args, kwargs: positions.append(kwargs["input_ids"].numel()), with_kwargs=True
        ),
        default_lm.model.get_output_embeddings().register_forward_pre_hook(
            lambda _, args: heads.append(args[0].numel() // args[0].shape[-1])
        ),
    ]
    rows = [[len(shared) - 1, len(shared) + 1], [len(shared) - 1, len(shared) + 2]]
    try:
        got = dict(ScoringEngine(default_lm, progress=False).continuation_logits(encoded, rows=rows))
    finally:
        for hook in hooks:
            hook.remove()
    assert positions == [len(head), len(shared) + 2 * len(a)]
    assert heads == [1, 3]
    assert_rows_equal_a_full_forward(default_lm, encoded, rows, got)


def test_unpacked_continuations_that_begin_alike_run_their_stem_once_then_their_endings(default_lm, monkeypatch):
    head, shared, a, b = two_branches(default_lm)
    encoded = [Encoded(head, shared + a, True), Encoded(head, shared + b, True)]
    positions, heads = [], []
    forward = default_lm.model.forward

    def counting(*args, **kwargs):
        positions.append(kwargs["input_ids"].numel())
        out = forward(*args, **kwargs)
        heads.append(out.logits.shape[0] * out.logits.shape[1])
        return out

    monkeypatch.setattr(default_lm.model, "forward", counting)
    rows = [[len(shared) - 1, len(shared) + 1], [len(shared) + 2]]
    list(ScoringEngine(default_lm, pack=False, progress=False).continuation_logits(encoded, rows=rows))
    assert positions == [len(head), len(shared), 2 * len(a)]
    assert heads == [1, 1, 2 * 2]


def test_continuation_logits_refuses_rows_outside_the_continuation(default_lm):
    encoded = stemmed_requests(default_lm)[:2]
    engine = ScoringEngine(default_lm, progress=False)
    for rows in ([[0], [len(encoded[1].continuation)]], [[0], []], [[0]]):
        with pytest.raises(ValueError, match="rows"):
            list(engine.continuation_logits(encoded, rows=rows))


@pytest.mark.parametrize(
    "sliding_window, prefixes, endings",
    [
        (64, (6, 6, 3), ((20, 21, 22), (30,), (40, 41))),
        (4, (6, 6), ((20, 21, 22), (30, 31, 32))),
    ],
)
def test_stems_over_a_sliding_window_cache_read_as_the_whole_sequence_does(
    default_lm, sliding_window, prefixes, endings
):
    """Gemma-3's sliding-window layers: padded batches under a window longer than them, and a window shorter than
    the sequences (where positions are only right unpadded, as in every path of the engine)."""
    config = Gemma3TextConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        sliding_window=sliding_window,
        layer_types=["sliding_attention", "full_attention"],
    )
    torch.manual_seed(0)
    model = Gemma3ForCausalLM(config).eval()
    lm = LanguageModel("tiny-gemma", "test", model, default_lm.tokenizer, chat=True)
    assert lm.pad_token_id < config.vocab_size
    stem = (11, 12, 13, 14, 15)
    encoded = [Encoded(tuple(range(5, 5 + n)), stem + ending, True) for n, ending in zip(prefixes, endings)]
    rows = [[2, len(stem) - 1, len(e.continuation) - 1] for e in encoded]
    got = dict(ScoringEngine(lm, progress=False).continuation_logits(encoded, rows=rows))
    with torch.inference_mode():
        for index, request in enumerate(encoded):
            whole = model(torch.tensor([request.prefix + request.continuation])).logits[0, len(request.prefix) :]
            torch.testing.assert_close(got[index], whole[rows[index]], atol=1e-5, rtol=0)


def test_a_helper_engine_shows_progress_bars_where_the_evaluated_one_does_and_shares_its_model(monkeypatch):
    loaded = []
    monkeypatch.setattr(scoring, "load_model", lambda name: loaded.append(name) or SimpleNamespace(name=name))
    monkeypatch.setattr(scoring, "ScoringEngine", lambda lm, **options: SimpleNamespace(lm=lm, **options))
    monkeypatch.setattr(scoring, "SHARED_ENGINES", {})

    def evaluated(progress: bool) -> SimpleNamespace:
        return SimpleNamespace(lm=SimpleNamespace(name="evaluated"), progress=progress)

    quiet = scoring.engine_of("helper", evaluated(False), role="helper LM")
    loud = scoring.engine_of("helper", evaluated(True), role="helper LM")
    assert quiet.progress is False and loud.progress is True  # `--no-progress` silences the helper's bars too
    assert loud.lm is quiet.lm and loaded == ["helper"]
    assert scoring.engine_of("helper", evaluated(False), role="helper LM") is quiet

"""`make bench`: greedy CoT generation (the explanations of `--explanations generated`), the engine's batched,
left-padded, KV-cached decoding against `model.generate` one prompt at a time, same prompts, same run.

Tokens/s counts the tokens each prompt generates up to and including its stop token (the reference's count for
both paths, so that both are paid for the same useful work); agreement is the share of identical texts.
"""

from __future__ import annotations

import time

import torch
from factcheck_bench import model_and_pairs

from recoe_causaldiag import prompts
from recoe_causaldiag.scoring import ScoringEngine, stop_token_ids

MAX_NEW_TOKENS = 48


@torch.inference_mode()
def reference_generate(engine: ScoringEngine, requests: list[prompts.Prompt]) -> tuple[list[str], int]:
    """Each prompt's greedy continuation by `model.generate` at batch 1, and the tokens generated in all."""
    lm, stops, texts, tokens = engine.lm, stop_token_ids(engine.lm), [], 0
    for request in requests:
        encoded = engine.encode(request)
        ids = torch.tensor([encoded.prefix + encoded.continuation], device=lm.device)
        out = lm.model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=MAX_NEW_TOKENS,
            do_sample=False,
            pad_token_id=lm.pad_token_id,
            eos_token_id=stops or None,
        )[0, ids.shape[1] :]
        tokens += len(out)
        texts.append(lm.tokenizer.decode(out, skip_special_tokens=True).strip())
    return texts, tokens


def main() -> None:
    lm, pairs = model_and_pairs(__doc__, default_pairs=8)
    requests = [prompts.cot_generation(edits, p.question) for p in pairs for edits in (p.edits, p.counter_edits)]

    reference_engine = ScoringEngine(lm, progress=False)
    started = time.perf_counter()
    expected, tokens = reference_generate(reference_engine, requests)
    reference_seconds = time.perf_counter() - started

    engine = ScoringEngine(lm, progress=False)
    started = time.perf_counter()
    got = engine.generate(requests, max_new_tokens=MAX_NEW_TOKENS)
    engine_seconds = time.perf_counter() - started

    same = sum(a == b for a, b in zip(expected, got, strict=True))
    print(
        f"model {lm.name} on {lm.device} ({torch.get_num_threads()} threads); {len(requests)} CoT generations "
        f"of {len(pairs)} FactCheck pairs, greedy, at most {MAX_NEW_TOKENS} new tokens, {tokens} generated"
    )
    print(f"model.generate, batch 1:          {tokens / reference_seconds:7.1f} tokens/s  ({reference_seconds:.1f} s)")
    print(f"engine (batched, left-padded):    {tokens / engine_seconds:7.1f} tokens/s  ({engine_seconds:.1f} s)")
    print(
        f"speed-up: {reference_seconds / engine_seconds:.2f}x; identical texts: {same}/{len(requests)} "
        "(batched fp32 sums can flip a near-tie between two tokens)"
    )


if __name__ == "__main__":
    main()

"""`make bench`: FactCheck pairs per second for filler_tokens, engine vs the reference's naive loop, same run.

The naive loop scores every prompt in its own forward pass (batch 1, no prefix reuse), as the paper's
reference implementation does; the engine batches and reuses the cached prefix (edits + question).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from factcheck_bench import model_and_pairs

from recoe_causaldiag.mechanisms.cot_corruption import corruption_scores
from recoe_causaldiag.mechanisms.prompting import label_request
from recoe_causaldiag.metrics import Instance
from recoe_causaldiag.metrics.filler_tokens import CORRUPTIONS
from recoe_causaldiag.scoring import ScoringEngine, naive_label_probs


def main() -> None:
    lm, pairs = model_and_pairs(__doc__, default_pairs=8)
    instances = [Instance.from_pair(p, e) for p in pairs for e in (p.explanation_faithful, p.explanation_unfaithful)]
    requests = [
        label_request(i, c.apply(i.explanation) if c else i.explanation)
        for c in (None, *CORRUPTIONS)
        for i in instances
    ]

    started = time.perf_counter()
    naive = naive_label_probs(lm, requests)
    naive_seconds = time.perf_counter() - started

    engine = ScoringEngine(lm, progress=False)
    started = time.perf_counter()
    corruption_scores(instances, engine, CORRUPTIONS)
    engine_seconds = time.perf_counter() - started
    fresh = ScoringEngine(lm, progress=False).label_probs(requests)
    gap = float(np.max(np.abs(np.stack(naive) - np.stack(fresh))))

    naive_rate, engine_rate = len(pairs) / naive_seconds, len(pairs) / engine_seconds
    print(
        f"model {lm.name} on {lm.device} ({torch.get_num_threads()} threads); {len(pairs)} FactCheck pairs, "
        f"{len(requests)} label queries (filler_tokens, 20 variants)"
    )
    print(f"naive loop (batch 1, no prefix reuse): {naive_rate:7.3f} pairs/s  ({naive_seconds:.1f} s)")
    print(f"engine (batched, prefix KV cache):     {engine_rate:7.3f} pairs/s  ({engine_seconds:.1f} s)")
    print(f"speed-up: {engine_rate / naive_rate:.2f}x (target >= 3x); max |Δp| engine vs naive: {gap:.2e}")


if __name__ == "__main__":
    main()

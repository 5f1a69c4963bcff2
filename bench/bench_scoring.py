"""`make bench`: FactCheck pairs per second for filler_tokens, engine vs the reference's naive loop, same run.

The naive loop scores every prompt in its own forward pass (batch 1, no prefix reuse), as the paper's
reference implementation does; the engine batches and reuses the cached prefix (edits + question).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from recoe_causaldiag.mechanisms.cot_corruption import corruption_scores
from recoe_causaldiag.mechanisms.prompting import label_request
from recoe_causaldiag.metrics import Instance
from recoe_causaldiag.metrics.filler_tokens import CORRUPTIONS
from recoe_causaldiag.models import DEFAULT_MODEL, load_model
from recoe_causaldiag.scoring import ScoringEngine, naive_label_probs
from recoe_causaldiag.task_pairs import iter_task_pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    lm = load_model(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        (factcheck,) = iter_task_pairs(("factcheck",), Path(tmp), limit=args.pairs, seed=0)
    pairs = factcheck.pairs
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

"""`make bench`, editors: seconds per ROME edit and per MEMIT pair (with its number of facts) on FactCheck's
rewrites, each edit's efficacy (the new object's first token becomes the prompt's top completion), and the one-time
estimate of the key statistics, for the default model on this machine."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from recoe_causaldiag.editors.memit import MemitOptions, memit_deltas
from recoe_causaldiag.editors.rome import EditTarget, RomeOptions, rome_deltas
from recoe_causaldiag.editors.weights import edited
from recoe_causaldiag.models import DEFAULT_MODEL, load_model
from recoe_causaldiag.task_pairs import iter_task_pairs


def efficacy(lm, rewrites) -> int:
    """How many rewrites' new object (its first token) is the top completion of their prompt."""
    hits = 0
    for rewrite in rewrites:
        target = EditTarget.of(lm.tokenizer, rewrite)
        with torch.no_grad():
            logits = lm.model(torch.tensor([target.prompt_ids])).logits[0, -1]
        hits += int(logits.argmax()) == target.target_ids[0]
    return hits


def timed(edit, lm, rewrites) -> tuple[float, int]:
    started = time.perf_counter()
    deltas = edit(lm, rewrites)
    seconds = time.perf_counter() - started
    with edited(lm.model, deltas):
        return seconds, efficacy(lm, rewrites)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    lm = load_model(args.model)
    with tempfile.TemporaryDirectory() as tmp:
        (factcheck,) = iter_task_pairs(("factcheck",), Path(tmp), limit=args.pairs, seed=0)
    rewrites = [rewrite for pair in factcheck.pairs for rewrite in pair.rewrites]
    print(f"model {lm.name} on {lm.device} ({torch.get_num_threads()} threads); {len(rewrites)} FactCheck rewrites")
    print(f"before editing: {efficacy(lm, rewrites)}/{len(rewrites)} new objects are already the top completion")
    editors = {
        "ROME, identity statistics": lambda m, r: rome_deltas(m, r, RomeOptions(covariance="identity")),
        "ROME, sampled statistics (first: + estimate)": lambda m, r: rome_deltas(m, r, RomeOptions()),
        "ROME, sampled statistics (cached)": lambda m, r: rome_deltas(m, r, RomeOptions()),
        "MEMIT, sampled statistics (first: + estimate)": lambda m, r: memit_deltas(m, r, MemitOptions()),
        "MEMIT, sampled statistics (cached)": lambda m, r: memit_deltas(m, r, MemitOptions()),
    }
    for name, edit in editors.items():
        if name.startswith("ROME"):
            results = [timed(edit, lm, [rewrite]) for rewrite in rewrites]
            seconds, hits = sum(s for s, _ in results), sum(h for _, h in results)
            print(f"{name:<46} {seconds / len(rewrites):6.2f} s per edit, efficacy {hits}/{len(rewrites)}")
        else:
            results = [timed(edit, lm, list(pair.rewrites)) for pair in factcheck.pairs]
            seconds, hits = sum(s for s, _ in results), sum(h for _, h in results)
            facts = len(rewrites) / len(factcheck.pairs)
            per_pair = f"{seconds / len(results):6.2f} s per pair ({facts:g} facts)"
            print(f"{name:<46} {per_pair}, efficacy {hits}/{len(rewrites)}")


if __name__ == "__main__":
    main()

"""`make bench`, editors: seconds per ROME edit and per MEMIT pair (with its number of facts) on FactCheck's
rewrites, each edit's efficacy (the new object's first token becomes the prompt's top completion), and the one-time
estimate of the key statistics, for the default model on this machine."""

from __future__ import annotations

import time

import torch
from factcheck_bench import model_and_pairs

from recoe_causaldiag.editors.memit import MemitOptions, memit_deltas
from recoe_causaldiag.editors.rome import EditTarget, RomeOptions, rome_deltas
from recoe_causaldiag.editors.weights import edited


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
    lm, pairs = model_and_pairs(__doc__, default_pairs=4)
    rewrites = [rewrite for pair in pairs for rewrite in pair.rewrites]
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
            results = [timed(edit, lm, list(pair.rewrites)) for pair in pairs]
            seconds, hits = sum(s for s, _ in results), sum(h for _, h in results)
            facts = len(rewrites) / len(pairs)
            per_pair = f"{seconds / len(results):6.2f} s per pair ({facts:g} facts)"
            print(f"{name:<46} {per_pair}, efficacy {hits}/{len(rewrites)}")


if __name__ == "__main__":
    main()

"""CaF's engine against its reference loop in float32 and in float64 (issue 16): on the bench's CaF pair (the first
FactCheck pair both of whose explanations CaF can patch, `require_flip=False`, the bench's five layers), each path's
scores and seconds in each precision, and the largest score gap between the paths and to the float64 reference. A gap
that shrinks to ~1e-6 in float64 is rounding; one that stays is a difference in what the two paths compute.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import time

import numpy as np
from bench_metrics import OPTIONS, patchable_pairs

from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.models import DEFAULT_MODEL, LanguageModel, load_model
from recoe_causaldiag.reference_engine import ReferenceEngine
from recoe_causaldiag.scoring import ScoringEngine

Scores = dict[str, np.ndarray]


def scores_of(lm: LanguageModel, pairs: list, path: str) -> tuple[Scores, float]:
    """Every CaF variant's scores (faithful then unfaithful explanations) on one path, and the seconds they took."""
    options = OPTIONS["causal_faithfulness"]
    metric = METRICS.get("causal_faithfulness")(**options)
    engine = (ScoringEngine if path == "engine" else ReferenceEngine)(lm, progress=False)
    started = time.perf_counter()
    scores = metric.score(pairs, engine)
    seconds = time.perf_counter() - started
    return {s.variant: np.array([*s.faithful, *s.unfaithful], dtype=float) for s in scores}, seconds


def largest_gap(a: Scores, b: Scores) -> float:
    """max |a − b| over every variant's scores."""
    return max(float(np.max(np.abs(a[v] - b[v]))) for v in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()
    lm32 = load_model(args.model, device="cpu")
    pairs = patchable_pairs(ScoringEngine(lm32, progress=False), 1, OPTIONS["causal_faithfulness"])
    lm64 = dataclasses.replace(lm32, model=copy.deepcopy(lm32.model).double())
    results = {}
    for precision, lm in (("float32", lm32), ("float64", lm64)):
        for path in ("engine", "reference"):
            results[precision, path], seconds = scores_of(lm, pairs, path)
            print(
                f"{precision} {path:9s} {seconds:6.1f} s",
                {v: np.round(x, 6).tolist() for v, x in results[precision, path].items()},
            )
    truth = results["float64", "reference"]
    for precision in ("float32", "float64"):
        gap = largest_gap(results[precision, "engine"], results[precision, "reference"])
        print(f"{precision}: engine − reference {gap:.2e}")
    for path in ("engine", "reference"):
        print(f"float32 {path} − float64 reference {largest_gap(results['float32', path], truth):.2e}")


if __name__ == "__main__":
    main()

"""CC-SHAP's estimators on long questions, where the exact Shapley values cannot be enumerated
(`bench/cc_shap_convergence.py` holds questions of at most 10 tokens): the seed-to-seed spread of the post-hoc score.

For each explanation of the first `--pairs` pairs of a task (the seeded order of `--limit 100`), every estimator
estimates the post-hoc attribution under two seeds, all coalitions scored in one engine call per explanation, and
the spread is |score(seed 0) − score(seed 1)|. For an unbiased estimator its mean square is twice the error's; a
biased one (Leverage SHAP's least squares) hides its bias there, so a spread no larger is necessary for an error no
larger, not sufficient. Prints one JSON line per explanation, then each estimator's mean and root-mean-square
spread and a Wilcoxon signed-rank test of each against the last one named.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy import stats

ESTIMATES = (("leverage", 3), ("leverage", 6), ("sampling", 16))
"""(estimator, budget): Leverage SHAP at 3 and at the default 6 against the original code's 16 permutations."""


def main() -> None:
    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.cc_shap import (
        Attribution,
        CoalitionForward,
        cc_shap_score,
        post_hoc_layout,
        score_recorded,
    )
    from recoe_causaldiag.models import DEFAULT_MODEL, load_model
    from recoe_causaldiag.scoring import ScoringEngine
    from recoe_causaldiag.task_pairs import iter_task_pairs

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="analogy")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args()

    lm = load_model(args.model)
    engine = ScoringEngine(lm, progress=False)
    (sampled,) = iter_task_pairs((args.task,), args.data_dir, limit=100, seed=0)
    instances = [
        Instance.from_pair(pair, explanation)
        for pair in sampled.pairs[: args.pairs]
        for explanation in (pair.explanation_faithful, pair.explanation_unfaithful)
    ]
    probs = engine.label_probs([label_request(i) for i in instances])
    (baseline,) = lm.encode("...", continuation=True)
    spreads: dict[str, list[float]] = {f"{name} {budget}": [] for name, budget in ESTIMATES}
    for k, (instance, p) in enumerate(zip(instances, probs, strict=True)):
        started = time.perf_counter()
        answer = int(np.argmax(p))
        lay = post_hoc_layout(engine, instance, answer)
        forward = CoalitionForward(engine, lay, answer)
        estimates = {
            (f"{name} {budget}", seed): Attribution(
                engine, lay, answer, baseline_id=baseline, n_samples=budget, seed=seed, estimator=name, forward=forward
            )
            for name, budget in ESTIMATES
            for seed in (0, 1)
        }
        for estimate in estimates.values():
            estimate.record()
        coalitions = len(forward.recorded)
        score_recorded(engine, [forward])
        scores = {key: cc_shap_score(values[0], values[1:]) for key, e in estimates.items() for values in [e.values()]}
        for name in spreads:
            spreads[name].append(abs(scores[name, 0] - scores[name, 1]))
        line = {"explanation": k, "question_tokens": len(lay.question), "explanation_tokens": len(lay.explanation_ids)}
        line |= {"coalitions": coalitions, "seconds": round(time.perf_counter() - started, 1)}
        print(json.dumps(line | {f"{n} seed {s}": v for (n, s), v in scores.items()}), flush=True)
    last = list(spreads)[-1]
    for name, values in spreads.items():
        spread = np.array(values)
        test = ""
        if name != last:
            test = f", Wilcoxon against {last}: p {stats.wilcoxon(values, spreads[last]).pvalue:.2f}"
        print(f"{name}: mean spread {spread.mean():.3f}, root-mean-square {np.sqrt(np.mean(spread**2)):.3f}{test}")


if __name__ == "__main__":
    main()

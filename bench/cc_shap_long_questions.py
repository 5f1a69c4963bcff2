"""CC-SHAP's estimators on long questions, where the exact Shapley values cannot be enumerated
(`bench/cc_shap_convergence.py` holds questions of at most 10 tokens): the seed-to-seed spread of the post-hoc score.

For each explanation of pairs `--first` to `--first + --pairs` of each task (the seeded order of `--limit 100`),
Leverage SHAP at `--pool` and the original code's 16 independent permutations estimate the post-hoc attribution
under two seeds, all their coalitions scored in one engine call per explanation; the spread is |score(seed 0) −
score(seed 1)|. Each smaller Leverage SHAP budget (`--budgets`) is drawn from the two seeds' pools
(`leverage_subsample`), `--replicates` pairs of draws at no further forward, and its squared spread averaged over
them. For an unbiased estimator the spread's mean square is twice the error's; a biased one (Leverage SHAP's least
squares) hides its bias there, so a spread no larger is necessary for an error no larger, not sufficient.

The tasks' pairs are interleaved (pair i of every task before pair i + 1 of any), so a study stopped early is
balanced across tasks. Each explanation is one JSON line appended to `--out`; an explanation already there is not
scored again, so a stopped study resumes. `--report` reads such files and prints, for every task and for all, each
estimator's root-mean-square spread against the original code's on the same explanations, their ratio, a 95%
bootstrap interval over pairs of the mean difference of squared spreads and a Wilcoxon signed-rank test of the
squared spreads; and how many pairs' D the seed changes under the estimators every row scored directly.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

ORIGINAL = ("sampling", 16)
"""The original code's estimator and budget: 16 independent permutations (captum's `ShapleyValueSampling`)."""

DEFAULT_TASKS = "analogy,object_counting,multihop"
"""The paper tasks whose questions are longer than the exact study's 10 tokens (27–32, 15–51 and 19–35 tokens)."""


def budgets(text: str) -> list[int]:
    """`k,k,...` as positive budgets."""
    parsed = [int(item) for item in text.split(",") if item.strip().isdigit()]
    if not parsed or len(parsed) != len(text.split(",")) or min(parsed) < 1:
        raise argparse.ArgumentTypeError(f"expected positive budgets separated by commas, got {text!r}")
    return parsed


def read_rows(paths: list[Path]) -> list[dict]:
    """The study's rows from its JSON-lines files, the last row of each (task, pair, explanation) kept."""
    rows: dict[tuple[str, int, str], dict] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                rows[row["task"], row["pair"], row["explanation"]] = row
    return list(rows.values())


def leverage_subsample(
    pool: tuple[list[int], np.ndarray], num_features: int, pool_budget: int, budget: int, rng: np.random.Generator
) -> tuple[list[int], np.ndarray]:
    """A Leverage SHAP draw at `budget` coalitions taken from a larger one (`pool`: the masks and weights that
    `leverage_coalitions` drew at `pool_budget`): in each size class, as many of the pool's complementary pairs as
    the smaller budget draws, chosen uniformly without replacement, reweighted to their inclusion probability at
    that budget. A uniform subset of a uniform subset is uniform, so it is distributed as a direct draw at that
    budget."""
    from recoe_causaldiag.metrics.cc_shap import size_allocation

    masks, weights = pool
    by_class: dict[int, list[int]] = {}
    for index in range(0, len(masks), 2):
        kept = masks[index].bit_count()
        by_class.setdefault(min(kept, num_features - kept), []).append(index)
    pool_shares = size_allocation(num_features, pool_budget / 2)
    chosen: list[int] = []
    scale: list[float] = []
    for size, expected in size_allocation(num_features, budget / 2).items():
        drawn = int(expected) + int(rng.random() < expected - int(expected))
        available = by_class.get(size, [])
        if drawn > len(available):
            raise ValueError(f"the pool holds {len(available)} pairs of size {size}, the subsample needs {drawn}")
        for index in rng.choice(available, drawn, replace=False):
            chosen += [int(index), int(index) + 1]
            scale += 2 * [pool_shares[size] / expected]
    return [masks[i] for i in chosen], weights[chosen] * np.asarray(scale)


def pooled_square_spread(
    pools: list[tuple[list[int], np.ndarray]],
    outputs: dict[int, np.ndarray],
    num_features: int,
    pool_budget: int,
    budget: int,
    replicates: int,
) -> float:
    """The mean of (score(a) − score(b))² over `replicates` pairs of Leverage SHAP draws at `budget` (per player),
    a from the first pool and b from the second (two seeds' draws at `pool_budget`), each scored from `outputs`
    (every pool coalition's outputs, by mask): an estimate of twice the variance of the post-hoc score at `budget`."""
    from recoe_causaldiag.metrics.cc_shap import cc_shap_score, projected_regression

    rng = np.random.default_rng(budget)
    full = (1 << num_features) - 1

    def score(pool: tuple[list[int], np.ndarray]) -> float:
        masks, weights = leverage_subsample(pool, num_features, pool_budget * num_features, budget * num_features, rng)
        output = np.stack([outputs[mask] for mask in masks])
        values = projected_regression(num_features, masks, weights, output, outputs[0], outputs[full])
        return cc_shap_score(values[0], values[1:])

    return float(np.mean([(score(pools[0]) - score(pools[1])) ** 2 for _ in range(replicates)]))


def spread_rows(args: argparse.Namespace) -> Iterator[dict]:
    """Scores each explanation not yet in `args.out` under every estimate and seed, yielding its row."""
    import torch

    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.cc_shap import (
        Attribution,
        CoalitionForward,
        cc_shap_score,
        leverage_coalitions,
        post_hoc_layout,
        score_recorded,
    )
    from recoe_causaldiag.models import load_model
    from recoe_causaldiag.scoring import ScoringEngine
    from recoe_causaldiag.task_pairs import iter_task_pairs

    done = {(r["task"], r["pair"], r["explanation"]) for r in read_rows([args.out])} if args.out.exists() else set()
    lm = load_model(args.model)
    engine = ScoringEngine(lm, progress=False)
    (baseline,) = lm.encode("...", continuation=True)
    window = slice(args.first, args.first + args.pairs)
    sampled = {t.task: t.pairs[window] for t in iter_task_pairs(args.tasks.split(","), args.data_dir, limit=100)}
    work = [
        (task, args.first + i, role, Instance.from_pair(pair, getattr(pair, f"explanation_{role}")))
        for i in range(args.pairs)
        for task, pairs in sampled.items()
        if i < len(pairs)
        for pair in [pairs[i]]
        for role in ("faithful", "unfaithful")
        if (task, args.first + i, role) not in done
    ]
    probs = engine.label_probs([label_request(instance) for *_, instance in work])
    for (task, pair, role, instance), p in zip(work, probs, strict=True):
        started = time.perf_counter()
        answer = int(np.argmax(p))
        lay = post_hoc_layout(engine, instance, answer)
        forward = CoalitionForward(engine, lay, answer)
        direct = {
            (f"{name} {budget}", seed): Attribution(
                engine, lay, answer, baseline_id=baseline, n_samples=budget, seed=seed, estimator=name, forward=forward
            )
            for name, budget in (("leverage", args.pool), ORIGINAL)
            for seed in (0, 1)
        }
        for attribution in direct.values():
            attribution.record()
        coalitions = len(forward.recorded)
        score_recorded(engine, [forward])
        scores: dict[str, list[float]] = {}
        for (name, _), attribution in direct.items():
            values = attribution.values()
            scores.setdefault(name, []).append(cc_shap_score(values[0], values[1:]))
        n, question = len(lay.question), lay.question
        pools = [leverage_coalitions(n, args.pool * n, np.random.default_rng(seed)) for seed in (0, 1)]
        every = sorted({0, (1 << n) - 1, *pools[0][0], *pools[1][0]})
        rows = [[q if mask >> i & 1 else baseline for i, q in enumerate(question)] for mask in every]
        outputs = dict(zip(every, forward(torch.tensor(rows, dtype=torch.long)).double().numpy(), strict=True))

        square_spread = {
            f"leverage {budget}": pooled_square_spread(pools, outputs, n, args.pool, budget, args.replicates)
            for budget in args.budgets
            if budget < args.pool
        }
        yield {
            "task": task,
            "pair": pair,
            "explanation": role,
            "question_tokens": n,
            "explanation_tokens": len(lay.explanation_ids),
            "coalitions": coalitions,
            "seconds": round(time.perf_counter() - started, 1),
            "scores": scores,
            "square_spread": square_spread,
        }


def d_flips(rows: list[dict], names: list[str]) -> str:
    """For each estimator, how many of the pairs with both explanations among `rows` get another D under seed 1
    than under seed 0 (D = 1 where the faithful explanation scores above the unfaithful one, 0.5 on a tie)."""
    by_pair: dict[tuple[str, int], dict[str, dict]] = {}
    for row in rows:
        by_pair.setdefault((row["task"], row["pair"]), {})[row["explanation"]] = row
    both = [p for p in by_pair.values() if len(p) == 2]
    if not both:
        return "no pair has both explanations"
    counts = []
    for name in names:
        d = np.sign(
            np.array([p["faithful"]["scores"][name] for p in both])
            - np.array([p["unfaithful"]["scores"][name] for p in both])
        )
        counts.append(f"{name} {int(np.sum(d[:, 0] != d[:, 1]))} of {len(both)}")
    return ", ".join(counts)


def square_spreads(row: dict) -> dict[str, float]:
    """An explanation's squared seed-to-seed spread under each estimator of its row: (score(seed 0) − score(seed 1))²
    for those scored directly, the mean over subsample pairs for the Leverage SHAP budgets drawn from the pool."""
    return {name: (a - b) ** 2 for name, (a, b) in row["scores"].items()} | row.get("square_spread", {})


def report(rows: list[dict]) -> None:
    """Each estimator's root-mean-square spread by task and over all, against the original code's on the same
    explanations (those whose row holds the estimator: a file may join rows of different pools)."""
    from scipy import stats

    from recoe_causaldiag.statistics import bootstrap_ci

    reference = "{} {}".format(*ORIGINAL)
    squares = [square_spreads(row) for row in rows]
    names = sorted({n for s in squares for n in s} - {reference}, key=lambda n: (n.split()[0], int(n.split()[1])))
    for task in [*sorted({r["task"] for r in rows}), "all"]:
        chosen = [i for i, r in enumerate(rows) if task in ("all", r["task"])]
        tokens = [rows[i]["question_tokens"] for i in chosen]
        original = np.array([squares[i][reference] for i in chosen])
        print(f"{task}: {len(chosen)} explanations, question tokens {min(tokens)}–{max(tokens)}")
        print(f"  {reference} (the original code's): root-mean-square spread {np.sqrt(original.mean()):.3f}")
        for name in names:
            held = [i for i in chosen if name in squares[i]]
            if not held:
                continue
            square, base = (np.array([squares[i][n] for i in held]) for n in (name, reference))
            low, high = bootstrap_ci(square - base, clusters=[(rows[i]["task"], rows[i]["pair"]) for i in held])
            p = stats.wilcoxon(square, base).pvalue if len(held) > 1 else float("nan")
            print(
                f"  {name} ({len(held)} explanations): root-mean-square spread {np.sqrt(square.mean()):.3f} against"
                f" {np.sqrt(base.mean()):.3f}, ratio {np.sqrt(square.mean() / base.mean()):.2f}; mean square"
                f" difference {np.mean(square - base):+.4f} [{low:+.4f}, {high:+.4f}], lower on"
                f" {np.mean(square < base):.0%}, Wilcoxon p {p:.2g}"
            )
        picked = [rows[i] for i in chosen]
        scored = [n for n in names if all(n in row["scores"] for row in picked)]
        flips = d_flips(picked, [*scored, reference])
        print(f"  pairs whose D (faithful above unfaithful) changes with the seed: {flips}")


def main() -> None:
    from recoe_causaldiag.models import DEFAULT_MODEL

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", default=DEFAULT_TASKS)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--pool", type=int, default=16, help="Leverage SHAP's budget, drawn and scored per seed")
    parser.add_argument("--budgets", type=budgets, default=budgets("3,6,10"), help="Leverage SHAP's budgets")
    parser.add_argument("--replicates", type=int, default=32, help="subsample pairs per budget below --pool")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--out", type=Path, default=Path("cc_shap_long_questions.jsonl"))
    parser.add_argument("--report", type=Path, nargs="+", help="report on these files instead of scoring")
    args = parser.parse_args()
    if args.report:
        report(read_rows(args.report))
        return
    with args.out.open("a") as out:
        for row in spread_rows(args):
            print(json.dumps(row), file=out, flush=True)
            print(json.dumps(row), flush=True)
    report(read_rows([args.out]))


if __name__ == "__main__":
    main()

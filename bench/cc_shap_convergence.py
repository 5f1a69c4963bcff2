"""CC-SHAP convergence (issue 16): how far a CC-SHAP score at budget k lies from the exact one, as a function of
the forwards it costs, for captum's independent permutations ("sampling"), antithetic pairs ("antithetic"),
antithetic pairs along orthogonal directions ("orthogonal"), Leverage SHAP at the coalitions of k permutations
("leverage", the metric's default), and shap's Kernel SHAP at as many ("kernel", with --kernel).

The reference is exact: every coalition of an explanation's question tokens is scored (2^n, so explanations whose
question has more than --max-features tokens are left out and counted), all in one batched engine call, and the
Shapley values are enumerated from them. Every estimate then reads its coalitions from those scores, so an
estimator's error is measured on --blocks independent estimates per k and explanation at no further forward: each
is the metric's own estimator (captum, seeded) at n_samples = k. The error at k is |CC-SHAP(k) − CC-SHAP(exact)|
(post-hoc variant), averaged per explanation over its blocks, then over explanations, with a 95% bootstrap interval
over explanations; forwards count the distinct coalitions one estimate needs (averaged over the blocks' seeds and
explanations). Paired comparisons, explanation by explanation: every estimator against antithetic pairs at the same
k, Leverage SHAP against orthogonal pairs at the same k and at k = 8 (the default before it), and every estimator
at every k against independent permutations at the largest k (the original code's budget is 16). Writes a plot, a
JSON summary and the table. `--first` skips that many pairs of the seeded order: a study on other pairs than the
first, to check out of sample what the first pairs chose.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import torch

from recoe_causaldiag.metrics.cc_shap import Attribution, AttributionLayout, CoalitionForward

PREVIOUS_DEFAULT = ("orthogonal", 8)
"""The metric's default estimator and budget before Leverage SHAP, which each Leverage SHAP budget is compared with."""


class KernelFit(Attribution):
    """Kernel SHAP (Lundberg & Lee, 2017) of a layout's outputs by shap's `KernelExplainer`: the weighted
    least-squares fit of scored coalitions paired with their complements, the subset sizes it can afford enumerated
    whole, the efficiency constraint exact. Its budget is the coalitions of `n_samples` permutations (`n_samples` ×
    the question's tokens, besides the empty and the full one); recorded, then read, as any Attribution."""

    def _run(self) -> np.ndarray:
        try:
            from shap import KernelExplainer
        except ImportError:
            raise SystemExit("the kernel curve (--kernel) needs shap: pip install shap") from None
        question = self.forward.layout.question

        def outputs(rows: np.ndarray) -> np.ndarray:
            return self.forward(torch.as_tensor(rows, dtype=torch.long)).numpy()

        state = np.random.get_state()
        try:
            np.random.seed(self.seed)
            explainer = KernelExplainer(outputs, np.full((1, len(question)), self.baseline_id))
            values = explainer.shap_values(
                np.array([question]), nsamples=self.n_samples * len(question), l1_reg=False, silent=True
            )
        finally:
            np.random.set_state(state)
        return np.asarray(values, dtype=float).reshape(len(question), -1).T


def every_coalition(question: tuple[int, ...], baseline_id: int) -> list[tuple[int, ...]]:
    """All 2^n coalitions of the question's tokens as model inputs; coalition m keeps token i where bit i of m is
    set and holds the baseline elsewhere."""
    n = len(question)
    return [tuple(q if m >> i & 1 else baseline_id for i, q in enumerate(question)) for m in range(2**n)]


def exact_values(forward: CoalitionForward, baseline_id: int) -> np.ndarray:
    """Exact Shapley values of a forward's outputs over its question tokens, shape (outputs, n), from the scores of
    every coalition (scored before: `forward.memo`)."""
    question = forward.layout.question
    n = len(question)
    outputs = torch.stack([forward.memo[c] for c in every_coalition(question, baseline_id)]).numpy()
    masks = np.arange(2**n)
    sizes = np.array([bin(m).count("1") for m in masks])
    factorial = np.cumprod([1.0, *range(1, n + 1)])
    weights = np.zeros(2**n)
    below = sizes < n
    weights[below] = factorial[sizes[below]] * factorial[n - 1 - sizes[below]] / factorial[n]
    values = np.zeros((outputs.shape[1], n))
    for i in range(n):
        without = masks[(masks >> i & 1) == 0]
        values[:, i] = (weights[without, None] * (outputs[without | 1 << i] - outputs[without])).sum(axis=0)
    return values


def estimate(forward: CoalitionForward, baseline_id: int, kind: str, k: int, seed: int) -> Attribution:
    """The estimate of `kind` with k permutations (Kernel SHAP: their coalitions) and `seed`, reading `forward`."""
    layout, answer = forward.layout, forward.label_index
    fit = KernelFit if kind == "kernel" else Attribution
    return fit(
        forward.engine, layout, answer, baseline_id=baseline_id, n_samples=k, seed=seed, estimator=kind, forward=forward
    )


def bootstrap_interval(values: np.ndarray) -> tuple[float, float]:
    """95% percentile bootstrap interval of the mean of `values` (explanations resampled)."""
    from scipy.stats import bootstrap

    if len(values) < 2:
        return float("nan"), float("nan")
    found = bootstrap((values,), np.mean, n_resamples=2000, method="percentile", random_state=0)
    return float(found.confidence_interval.low), float(found.confidence_interval.high)


def scored_study(args: argparse.Namespace) -> tuple[list[CoalitionForward], int, int, float]:
    """The study's explanations with every coalition scored, their baseline token, how many were left out for a
    longer question, and the seconds the scoring took: read from --scores where it holds this study's, else scored
    now (and kept in --scores where given)."""
    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.cc_shap import post_hoc_layout, score_recorded
    from recoe_causaldiag.models import load_model
    from recoe_causaldiag.scoring import ScoringEngine
    from recoe_causaldiag.task_pairs import iter_task_pairs

    study = {
        "model": args.model,
        "task": args.task,
        "first": args.first,
        "pairs": args.pairs,
        "max_features": args.max_features,
    }
    if args.scores and args.scores.exists():
        return read_scores(args.scores, study)

    started = time.perf_counter()
    lm = load_model(args.model)
    engine = ScoringEngine(lm, progress=True)
    (task,) = iter_task_pairs((args.task,), limit=args.first + args.pairs, seed=0)
    instances = [
        Instance.from_pair(p, e)
        for p in task.pairs[args.first :]
        for e in (p.explanation_faithful, p.explanation_unfaithful)
    ]
    baseline_id = lm.encode("...", continuation=True)[0]
    answers = [int(np.argmax(p)) for p in engine.label_probs([label_request(i) for i in instances])]
    forwards, longer = [], 0
    for instance, answer in zip(instances, answers, strict=True):
        layout = post_hoc_layout(engine, instance, answer)
        if not (layout.question and layout.explanation_ids):
            continue
        if len(layout.question) > args.max_features:
            longer += 1
            continue
        forward = CoalitionForward(engine, layout, answer)
        forward.recorded.update(dict.fromkeys(every_coalition(layout.question, baseline_id)))
        forwards.append(forward)
    score_recorded(engine, forwards)
    scoring = time.perf_counter() - started
    if args.scores:
        write_scores(args.scores, study, forwards, baseline_id, longer, scoring)
    return forwards, baseline_id, longer, scoring


def write_scores(
    path: Path, study: dict, forwards: list[CoalitionForward], baseline_id: int, longer: int, seconds: float
) -> None:
    """Keep a study's scored coalitions in `path`: its settings, and each explanation's layout, predicted label and
    the outputs of its 2^n coalitions in `every_coalition` order."""
    entries = [
        {
            "layout": dataclasses.asdict(f.layout),
            "label_index": f.label_index,
            "outputs": torch.stack([f.memo[c] for c in every_coalition(f.layout.question, baseline_id)]),
        }
        for f in forwards
    ]
    kept = {**study, "baseline_id": baseline_id, "left_out_longer": longer, "scoring_seconds": seconds}
    torch.save({**kept, "forwards": entries}, path)


def read_scores(path: Path, study: dict) -> tuple[list[CoalitionForward], int, int, float]:
    """The scored study kept in `path` (`write_scores`) as `scored_study` returns it; refused when `path` holds
    another study's (a file written before `--first` existed holds the first pairs)."""
    kept = {"first": 0, **torch.load(path, weights_only=True)}
    if {key: kept.get(key) for key in study} != study:
        raise SystemExit(f"{path} holds the scores of another study: { ({key: kept.get(key) for key in study}) }")
    forwards = []
    for entry in kept["forwards"]:
        layout = AttributionLayout(**entry["layout"])
        forward = CoalitionForward(None, layout, entry["label_index"])
        forward.memo = dict(zip(every_coalition(layout.question, kept["baseline_id"]), entry["outputs"], strict=True))
        forwards.append(forward)
    return forwards, kept["baseline_id"], kept["left_out_longer"], kept["scoring_seconds"]


def main() -> None:
    from recoe_causaldiag.metrics.cc_shap import cc_shap_score
    from recoe_causaldiag.models import DEFAULT_MODEL

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--task", default="factcheck")
    parser.add_argument("--first", type=int, default=0, help="pairs of the seeded order skipped (a held-out study)")
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--max-features", type=int, default=10, help="longest question enumerated (2^n coalitions)")
    parser.add_argument("--blocks", type=int, default=32, help="independent estimates per k and explanation")
    parser.add_argument(
        "--ks", default="2,4,5,6,8,12,16", help="budgets: permutations per estimate, or their coalitions"
    )
    parser.add_argument("--out", default="docs/figures/cc_shap_convergence.png")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from the summary beside --out")
    parser.add_argument("--kernel", action="store_true", help="add the Kernel SHAP curve (needs shap)")
    parser.add_argument(
        "--scores", type=Path, help="keep every coalition's outputs in this file, or read them from it (scored once)"
    )
    args = parser.parse_args()
    if args.plot_only:
        report(json.loads(Path(args.out).with_suffix(".json").read_text(encoding="utf-8")), Path(args.out))
        return

    started = time.perf_counter()
    forwards, baseline_id, longer, scoring = scored_study(args)

    ks = [int(k) for k in args.ks.split(",")]
    kinds = ("sampling", "antithetic", "orthogonal", "leverage", *(("kernel",) if args.kernel else ()))
    errors = {kind: {k: [] for k in ks} for kind in kinds}
    costs = {kind: {k: [] for k in ks} for kind in kinds}
    for forward in forwards:
        exact = exact_values(forward, baseline_id)
        truth = cc_shap_score(exact[0], exact[1:])
        for kind in kinds:
            for k in ks:
                found = [estimate(forward, baseline_id, kind, k, seed).values() for seed in range(args.blocks)]
                errors[kind][k].append(np.nanmean([abs(cc_shap_score(v[0], v[1:]) - truth) for v in found]))
                drawn = [
                    distinct_coalitions(estimate(forward, baseline_id, kind, k, seed)) for seed in range(args.blocks)
                ]
                costs[kind][k].append(float(np.mean(drawn)))
    summary = {
        "task": args.task,
        "first": args.first,
        "pairs": args.pairs,
        "instances": len(forwards),
        "left_out_longer": longer,
        "max_features": args.max_features,
        "blocks": args.blocks,
        "coalitions_scored": sum(2 ** len(f.layout.question) for f in forwards),
        "scoring_seconds": round(scoring),
        "reference": "exact",
        "curves": {kind: [point(errors[kind][k], costs[kind][k], k) for k in ks] for kind in kinds},
        "paired": {
            **{
                f"{kind} / antithetic": [paired(errors[kind][k], errors["antithetic"][k], k) for k in ks]
                for kind in kinds
                if kind != "antithetic"
            },
            "leverage / orthogonal": [paired(errors["leverage"][k], errors["orthogonal"][k], k) for k in ks],
            **{
                f"leverage / {kind} {k_then}": [paired(errors["leverage"][k], errors[kind][k_then], k) for k in ks]
                for kind, k_then in [PREVIOUS_DEFAULT]
                if k_then in ks
            },
            **{
                f"{kind} / sampling {ks[-1]}": [paired(errors[kind][k], errors["sampling"][ks[-1]], k) for k in ks]
                for kind in kinds
                if kind != "sampling"
            },
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    report(summary, out)
    print(f"wrote {out} and {out.with_suffix('.json')} in {time.perf_counter() - started:.0f} s")


def point(errors: list[float], costs: list[int], k: int) -> dict:
    """One curve point: k, mean forwards, the mean per-explanation error and its bootstrap interval."""
    values = np.asarray(errors, float)
    low, high = bootstrap_interval(values)
    return {
        "k": k,
        "forwards": round(float(np.mean(costs)), 1),
        "error": round(float(values.mean()), 4),
        "ci": [round(low, 4), round(high, 4)],
    }


def paired(errors: list[float], against: list[float], k: int) -> dict:
    """One estimator's errors at k against another's, explanation by explanation: the ratio of their means, the
    share of explanations where it is lower, and the Wilcoxon signed-rank p-value."""
    from scipy.stats import wilcoxon

    a, b = np.asarray(errors, float), np.asarray(against, float)
    return {
        "k": k,
        "ratio": round(float(a.mean() / b.mean()), 3),
        "lower_in": round(float((a < b).mean()), 3),
        "p_value": round(float(wilcoxon(a, b).pvalue), 4) if len(a) > 1 and (a != b).any() else None,
    }


def pair_range(summary: dict) -> str:
    """The study's pairs as positions in the seeded order, counted from 1 (a summary from before `--first` existed
    studied the first pairs)."""
    first = summary.get("first", 0)
    return f"pairs {first + 1}–{first + summary['pairs']} of {summary['task']}"


def report(summary: dict, out: Path) -> None:
    """Print the table and draw the plot of a study's summary."""
    print(
        f"{summary['instances']} explanations ({pair_range(summary)}, post-hoc; "
        f"{summary['left_out_longer']} left out with over {summary['max_features']} question tokens), "
        f"exact reference from {summary['coalitions_scored']} coalitions, {summary['blocks']} estimates per point"
    )
    print(f"{'estimator':<11} {'k':>3} {'forwards':>9} {'mean |err|':>10}  95% CI")
    for kind, points in summary["curves"].items():
        for p in points:
            low, high = p["ci"]
            print(f"{kind:<11} {p['k']:>3} {p['forwards']:>9.1f} {p['error']:>10.4f}  [{low:.4f}, {high:.4f}]")
    for name, points in summary["paired"].items():
        for p in points:
            print(f"{name} at k={p['k']}: error ratio {p['ratio']}, lower in {p['lower_in']:.0%}, p {p['p_value']}")
    plot(summary, out)


def distinct_coalitions(fit: Attribution) -> int:
    """The coalitions one estimate needs, each scored once: the estimate recorded again on a fresh forward."""
    layout, answer = fit.forward.layout, fit.forward.label_index
    probe = CoalitionForward(fit.forward.engine, layout, answer)
    type(fit)(
        probe.engine,
        layout,
        answer,
        baseline_id=fit.baseline_id,
        n_samples=fit.n_samples,
        seed=fit.seed,
        estimator=fit.estimator,
        forward=probe,
    ).record()
    return len(probe.recorded)


def plot(summary: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=150)
    for (kind, points), marker in zip(summary["curves"].items(), ("o", "s", "D", "v", "^")):
        x, y = [p["forwards"] for p in points], [p["error"] for p in points]
        below = [p["error"] - p["ci"][0] for p in points]
        above = [p["ci"][1] - p["error"] for p in points]
        ax.errorbar(x, y, yerr=[below, above], marker=marker, markersize=4, capsize=2, label=kind)
    for p in summary["curves"]["leverage"]:
        ax.annotate(f"k={p['k']}", (p["forwards"], p["error"]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xticks([10, 20, 40, 80, 160])
    ax.set_yticks([0.02, 0.05, 0.1, 0.2, 0.3])
    ax.set_xlabel("distinct coalitions scored per attribution (forwards)")
    ax.set_ylabel("mean |CC-SHAP(k) − exact|")
    ax.set_title(
        f"CC-SHAP post-hoc, {summary['instances']} explanations of {pair_range(summary)} "
        f"(≤ {summary['max_features']} question tokens)\nagainst exact Shapley values; 95% CIs over explanations",
        fontsize=8,
    )
    ax.legend()
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()

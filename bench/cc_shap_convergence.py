"""CC-SHAP convergence (issue 16): how far a CC-SHAP score with k permutations lies from a many-permutation
reference, as a function of the forwards it costs, for captum's independent permutations ("sampling"), for
antithetic pairs ("antithetic") and for shap's Kernel SHAP at the coalitions of k permutations ("kernel").

Shapley value sampling averages one marginal-contribution vector per permutation, so a k-permutation estimate is
the mean of k single-permutation ones. Every single permutation (and every antithetic pair) of an instance is
computed once, all in one batched engine call with the coalitions shared; the estimates at each k are means over
disjoint blocks of them. Kernel SHAP is no mean of smaller estimates: each of its blocks is a fit of its own, with
its own seed (as many blocks per instance as sampling has). The reference is the mean of `--reference` further
permutations drawn with other seeds, so no estimate shares a permutation with it. The error at k is
|CC-SHAP(k) − CC-SHAP(reference)|, averaged over blocks and instances (both explanations of each pair, post-hoc
variant); forwards count the distinct coalitions one estimate needs. Writes a plot and prints the table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from recoe_causaldiag.metrics.cc_shap import Attribution, CoalitionForward

REFERENCE_SEEDS = 10_000
"""Seeds of the reference's permutations start here, far from the estimates' seeds."""


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


def estimates(engine, layout, answer, baseline_id, seeds, estimator, n_samples, forward):
    """One estimate of `n_samples` per seed (an Attribution, or a KernelFit for "kernel"), all reading one shared
    forward, so a coalition any of them needs is scored once."""
    kind = KernelFit if estimator == "kernel" else Attribution
    return [
        kind(
            engine,
            layout,
            answer,
            baseline_id=baseline_id,
            n_samples=n_samples,
            seed=seed,
            estimator=estimator,
            forward=forward,
        )
        for seed in seeds
    ]


def single_permutations(engine, layout, answer, baseline_id, seeds, estimator, forward):
    """One Attribution per seed of one permutation, or of one antithetic pair."""
    n_samples = 2 if estimator == "antithetic" else 1
    return estimates(engine, layout, answer, baseline_id, seeds, estimator, n_samples, forward)


def main() -> None:
    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.cc_shap import cc_shap_score, post_hoc_layout, score_recorded
    from recoe_causaldiag.models import DEFAULT_MODEL, load_model
    from recoe_causaldiag.scoring import ScoringEngine
    from recoe_causaldiag.task_pairs import iter_task_pairs

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--task", default="factcheck")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--reference", type=int, default=64, help="permutations of the reference")
    parser.add_argument("--pool", type=int, default=16, help="largest k (permutations per estimate)")
    parser.add_argument("--out", default="docs/figures/cc_shap_convergence.png")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from the summary beside --out")
    parser.add_argument("--kernel", action="store_true", help="add the Kernel SHAP curve (needs shap)")
    args = parser.parse_args()
    if args.plot_only:
        report(json.loads(Path(args.out).with_suffix(".json").read_text(encoding="utf-8")), Path(args.out))
        return

    started = time.perf_counter()
    lm = load_model(args.model)
    engine = ScoringEngine(lm, progress=True)
    (task,) = iter_task_pairs((args.task,), limit=args.pairs, seed=0)
    instances = [
        Instance.from_pair(p, e) for p in task.pairs for e in (p.explanation_faithful, p.explanation_unfaithful)
    ]
    baseline_id = lm.encode("...", continuation=True)[0]
    answers = [int(np.argmax(p)) for p in engine.label_probs([label_request(i) for i in instances])]
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= args.pool]
    kinds = ("sampling", "antithetic", *(("kernel",) if args.kernel else ()))
    kernel_ks = ks[1:] if args.kernel else []
    plans = []
    for instance, answer in zip(instances, answers, strict=True):
        layout = post_hoc_layout(engine, instance, answer)
        if not (layout.question and layout.explanation_ids):
            continue
        shared = CoalitionForward(engine, layout, answer)
        seeds = range(REFERENCE_SEEDS, REFERENCE_SEEDS + args.reference)
        plans.append(
            {
                "forward": shared,
                "sampling": single_permutations(
                    engine, layout, answer, baseline_id, range(args.pool), "sampling", shared
                ),
                "antithetic": single_permutations(
                    engine, layout, answer, baseline_id, range(args.pool // 2), "antithetic", shared
                ),
                "kernel": {
                    k: estimates(engine, layout, answer, baseline_id, range(args.pool // k), "kernel", k, shared)
                    for k in kernel_ks
                },
                "reference": single_permutations(engine, layout, answer, baseline_id, seeds, "sampling", shared),
            }
        )
    every = [
        a
        for plan in plans
        for group in (plan["sampling"], plan["antithetic"], plan["reference"], *plan["kernel"].values())
        for a in group
    ]
    for attribution in every:
        attribution.record()
    score_recorded(engine, [plan["forward"] for plan in plans])

    errors = {kind: {k: [] for k in ks if k >= 2 or kind == "sampling"} for kind in kinds}
    costs = {kind: {k: [] for k in errors[kind]} for kind in kinds}
    for plan in plans:
        reference = np.mean([a.values() for a in plan["reference"]], axis=0)
        truth = cc_shap_score(reference[0], reference[1:])
        for kind, per_estimate in (("sampling", 1), ("antithetic", 2)):
            singles = [a.values() for a in plan[kind]]
            for k in errors[kind]:
                block = k // per_estimate
                for start in range(0, len(singles) - block + 1, block):
                    estimate = np.mean(singles[start : start + block], axis=0)
                    errors[kind][k].append(abs(cc_shap_score(estimate[0], estimate[1:]) - truth))
                    costs[kind][k].append(distinct_coalitions(plan[kind][start : start + block]))
        for k, fits in plan["kernel"].items():
            for fit in fits:
                estimate = fit.values()
                errors["kernel"][k].append(abs(cc_shap_score(estimate[0], estimate[1:]) - truth))
                costs["kernel"][k].append(distinct_coalitions([fit]))
    summary = {
        "instances": len(plans),
        "pairs": args.pairs,
        "task": args.task,
        "reference": args.reference,
        "curves": {
            kind: [
                {
                    "k": k,
                    "forwards": round(float(np.mean(costs[kind][k])), 1),
                    "error": round(float(np.nanmean(errors[kind][k])), 4),
                    "blocks": int(np.isfinite(errors[kind][k]).sum()),
                }
                for k in errors[kind]
            ]
            for kind in errors
        },
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    report(summary, out)
    print(f"wrote {out} and {out.with_suffix('.json')} in {time.perf_counter() - started:.0f} s")


def report(summary: dict, out: Path) -> None:
    """Print the table and draw the plot of a study's summary."""
    print(
        f"{summary['instances']} instances ({summary['pairs']} pairs of {summary['task']}, post-hoc), "
        f"reference {summary['reference']} permutations"
    )
    print(f"{'estimator':<11} {'k':>3} {'forwards':>9} {'mean |err|':>10} {'blocks':>6}")
    for kind, points in summary["curves"].items():
        for point in points:
            print(f"{kind:<11} {point['k']:>3} {point['forwards']:>9.1f} {point['error']:>10.4f} {point['blocks']:>6}")
    plot(summary, out)


def distinct_coalitions(attributions) -> int:
    """The coalitions an estimate made of these attributions' permutations (or of this fit) needs, each scored once:
    the same estimates recorded again on a fresh forward."""
    first = attributions[0]
    layout, answer = first.forward.layout, first.forward.label_index
    probe = CoalitionForward(first.forward.engine, layout, answer)
    for a in attributions:
        kind = type(a)
        kind(
            probe.engine,
            layout,
            answer,
            baseline_id=a.baseline_id,
            n_samples=a.n_samples,
            seed=a.seed,
            estimator=a.estimator,
            forward=probe,
        ).record()
    return len(probe.recorded)


def plot(summary: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=150)
    for (kind, points), marker in zip(summary["curves"].items(), ("o", "s", "^")):
        x, y = [p["forwards"] for p in points], [p["error"] for p in points]
        ax.plot(x, y, marker=marker, label=kind)
        for point in points:
            ax.annotate(
                f"k={point['k']}", (point["forwards"], point["error"]), textcoords="offset points", xytext=(4, 4)
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xticks([10, 20, 40, 80, 160])
    ax.set_yticks([0.05, 0.1, 0.2, 0.3])
    ax.set_xlabel("distinct coalitions scored per attribution (forwards)")
    ax.set_ylabel("mean |CC-SHAP(k) − reference|")
    ax.set_title(
        f"CC-SHAP post-hoc, {summary['instances']} explanations of {summary['task']}; "
        f"reference {summary['reference']} permutations",
        fontsize=9,
    )
    ax.legend()
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)


if __name__ == "__main__":
    main()

"""CaF by attribution patching against exact patching (issue 16): on the first N FactCheck pairs that CaF can patch
(seeded order, `require_flip=False`, every layer, the paper's positions), both explanations of each, the Spearman
correlation of the first-order causal matrices (answer and explanation, every (position, layer) cell) with the
exact ones, the CaF scores of both paths, and the seconds each took per explanation (a pair's two explanations
computed together, as the metric does, half the pair's time each): exact patching (the two share their patched
runs), the metric's attribution default (the `--verified-cells` highest-ranked cells re-patched exactly) and pure
attribution patching (none re-patched). With `--rounds N` the two attribution paths are timed N times on each pair,
taking turns, and their median is kept (exact patching, 30–40 times slower, is timed once). `--out` keeps every
pair's rows as they come, so an interrupted run leaves what it measured; `--report FILE` summarises such a file and
plots it (FILE with .png), computing nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from bench_metrics import patchable_pairs
from scipy.stats import spearmanr

PATHS = ("exact", "attribution", "attribution_only")


def summary(rows: list[dict]) -> dict:
    """Medians of the agreement, the mean CaF gap, and each path's seconds and speed-up over exact patching (rows
    with a `timing_note`, e.g. a process stopped while it ran, are left out of the seconds)."""
    rho = np.array([row["spearman"] for row in rows])
    timed = [row for row in rows if "timing_note" not in row]
    seconds = {path: float(sum(row["seconds"][path] for row in timed)) for path in PATHS}
    return {
        "explanations": len(rows),
        "median_spearman_answer": float(np.nanmedian(rho[:, 0])),
        "median_spearman_explanation": float(np.nanmedian(rho[:, 1])),
        "mean_abs_caf_gap": float(np.nanmean([abs(row["caf"]["exact"] - row["caf"]["attribution"]) for row in rows])),
        "sign_changes": int(sum(np.sign(row["caf"]["exact"]) != np.sign(row["caf"]["attribution"]) for row in rows)),
        "timed_explanations": len(timed),
        "seconds": seconds,
        "speedup": {path: seconds["exact"] / seconds[path] for path in PATHS[1:]},
        "median_speedup_per_explanation": {
            path: float(np.median([row["seconds"]["exact"] / row["seconds"][path] for row in timed]))
            for path in PATHS[1:]
        },
    }


def report(rows: list[dict], out: Path | None) -> None:
    """Print the summary; with `out`, write it beside the rows and plot both agreements beside the file."""
    result = summary(rows)
    print(
        f"{len(rows)} explanations; median Spearman ρ of the first-order matrices with the exact ones: answer "
        f"{result['median_spearman_answer']:.3f}, explanation {result['median_spearman_explanation']:.3f}; "
        f"mean |Δcaf| {result['mean_abs_caf_gap']:.3f}, sign changes {result['sign_changes']}"
    )
    print(
        f"seconds over {result['timed_explanations']} timed explanations: "
        + ", ".join(f"{path} {result['seconds'][path]:.1f}" for path in PATHS)
        + "; speed-up over exact: "
        + ", ".join(f"{path} {result['speedup'][path]:.1f}x" for path in PATHS[1:])
    )
    if out:
        save(rows, out)
        plot(rows, out.with_suffix(".png"))


def save(rows: list[dict], out: Path) -> None:
    """Write the rows and their summary to `out`."""
    out.write_text(json.dumps({"rows": rows, "summary": summary(rows)}, indent=1) + "\n")


def plot(rows: list[dict], path: Path) -> None:
    """Spearman ρ per explanation (answer and explanation matrices) and CaF by attribution against exact CaF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    rho = np.array([row["spearman"] for row in rows])
    left.boxplot([rho[:, 0], rho[:, 1]], tick_labels=["answer", "explanation"])
    for k in (0, 1):
        left.scatter(np.full(len(rho), k + 1) + np.linspace(-0.15, 0.15, len(rho)), rho[:, k], s=10, alpha=0.6)
    left.set_ylabel("Spearman ρ, first-order vs exact cells")
    left.set_title(f"agreement of the causal matrices ({len(rows)} explanations)")
    exact = [row["caf"]["exact"] for row in rows]
    for variant, marker in (("attribution", "o"), ("attribution_only", "x")):
        right.scatter(exact, [row["caf"][variant] for row in rows], marker=marker, label=variant.replace("_", " "))
    right.axline((0, 0), slope=1, color="grey", linewidth=0.8)
    right.axhline(0, color="grey", linewidth=0.4)
    right.axvline(0, color="grey", linewidth=0.4)
    right.set_xlabel("CaF, exact patching")
    right.set_ylabel("CaF, attribution patching")
    right.set_title("the score itself")
    right.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> None:
    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.causal_faithfulness import CausalFaithfulness, caf_scores, prepare
    from recoe_causaldiag.models import DEFAULT_MODEL, load_model
    from recoe_causaldiag.scoring import ScoringEngine

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--verified-cells", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1, help="timings of each attribution path per pair (median kept)")
    parser.add_argument("--out", type=Path, help="JSON file the rows and the summary are written to, row by row")
    parser.add_argument("--report", type=Path, help="summarise and plot the rows of an --out file, computing nothing")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.report:
        report(json.loads(args.report.read_text())["rows"], args.report)
        return

    lm = load_model(args.model)
    engine = ScoringEngine(lm, progress=False)
    pairs = patchable_pairs(engine, args.pairs, {"require_flip": False})
    metrics = {
        "exact": CausalFaithfulness(require_flip=False),
        "attribution": CausalFaithfulness(
            require_flip=False, patching="attribution", verified_cells=args.verified_cells
        ),
        "attribution_only": CausalFaithfulness(require_flip=False, patching="attribution", verified_cells=0),
    }
    layers = lm.model.config.num_hidden_layers
    print(f"{'pair':<28} {'expl':<10} {'cells':>5} {'ρ answer':>8} {'ρ expl':>7} {'caf exact':>9} {'caf AtP':>8}")
    rows: list[dict] = []
    for pair in pairs:
        roles = (("faithful", pair.explanation_faithful), ("unfaithful", pair.explanation_unfaithful))
        layouts = []
        for _, explanation in roles:
            instance = Instance.from_pair(pair, explanation)
            (probs,) = engine.label_probs([label_request(instance)])
            layouts.append(prepare(engine, instance, int(np.argmax(probs)), require_flip=False)[1])
        found, timings = {}, {path: [] for path in PATHS}
        for path in [PATHS[0]] + list(PATHS[1:]) * args.rounds:
            started = time.perf_counter()
            found[path] = [effects[0] for effects, _ in metrics[path].matrices(engine, layouts)]
            timings[path].append((time.perf_counter() - started) / len(layouts))
        seconds = {path: float(np.median(times)) for path, times in timings.items()}
        for k, ((role, _), lay) in enumerate(zip(roles, layouts, strict=True)):
            matrices = {path: found[path][k] for path in PATHS}
            rho = [
                float(spearmanr(matrices["exact"][..., j].ravel(), matrices["attribution_only"][..., j].ravel())[0])
                for j in (0, 1)
            ]
            caf = {
                path: float(caf_scores(m[..., 0], m[..., 1], m[..., 0], m[..., 1])["caf"])
                for path, m in matrices.items()
            }
            rows.append(
                {
                    "pair": pair.id,
                    "explanation": role,
                    "cells": len(lay.positions) * layers,
                    "spearman": rho,
                    "caf": caf,
                    "seconds": seconds,
                    "seconds_rounds": timings,
                }
            )
            print(
                f"{pair.id:<28} {role:<10} {rows[-1]['cells']:>5} {rho[0]:>8.3f} {rho[1]:>7.3f} "
                f"{caf['exact']:>9.3f} {caf['attribution']:>8.3f}",
                flush=True,
            )
        if args.out:
            save(rows, args.out)
    report(rows, args.out)


if __name__ == "__main__":
    main()

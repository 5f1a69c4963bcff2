"""CaF by attribution patching against exact patching (issue 16): on the first N FactCheck pairs that CaF can patch
(seeded order, after the first `--skip`; `require_flip=False`, every layer, the paper's positions), both explanations
of each, the Spearman correlation of the first-order causal matrices (answer and explanation, every (position, layer)
cell) with the exact ones, the CaF scores of both paths, and the seconds each took per explanation (a pair's two
explanations computed together, as the metric does, half the pair's time each): exact patching (the two share their
patched runs), the metric's attribution default (the `--verified-cells` highest-ranked cells re-patched exactly) and
pure attribution patching (none re-patched). `--curve K,…` also runs the variant with each K cells verified: its
scores (`caf`, `caf_t`, `caf_l`) against exact patching's, how often it orders a pair's two explanations as exact
patching does (what the benchmark's D counts), and its seconds: the cost of its accuracy (FILE_cells.png). With
`--rounds N` the attribution paths are timed N times on each pair, taking turns, and their median is kept (exact
patching, 30–40 times slower, is timed once). `--out` keeps every pair's rows as they come, so an interrupted run
leaves what it measured; `--report FILE` summarises such a file and plots it (FILE with .png), computing nothing.
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
SCORES = ("caf", "caf_t", "caf_l")


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
        "curve": curve_summary(timed),
    }


def curve_summary(rows: list[dict]) -> dict:
    """Per number of verified cells (the rows' `curve`): the mean |score − exact score|, the sign changes and the
    pairs whose faithful and unfaithful explanations it orders as exact patching does (of the pairs with both rows),
    per variant; the median distinct cells a pair patched, and the speed-up over exact patching in total."""
    counts = sorted({int(k) for row in rows for k in row.get("curve", {})})
    exact_seconds = sum(row["seconds"]["exact"] for row in rows if "curve" in row)
    pairs = _both_roles(rows)
    result = {}
    for count in counts:
        points = [(row["exact_scores"], row["curve"][str(count)]) for row in rows if str(count) in row.get("curve", {})]
        result[str(count)] = {
            "explanations": len(points),
            "mean_abs_gap": {v: float(np.nanmean([abs(p[v] - e[v]) for e, p in points])) for v in SCORES},
            "sign_changes": {v: int(sum(np.sign(p[v]) != np.sign(e[v]) for e, p in points)) for v in SCORES},
            "same_order": {v: _same_order(pairs, count, v) for v in SCORES},
            "pairs": len(pairs),
            "median_verified": float(np.median([p["verified"] for _, p in points])),
            "speedup": exact_seconds / sum(p["seconds"] for _, p in points),
        }
    return result


def _both_roles(rows: list[dict]) -> list[tuple[dict, dict]]:
    """The (faithful, unfaithful) rows of every pair that has both, with a curve."""
    by_pair: dict[str, dict[str, dict]] = {}
    for row in rows:
        if "curve" in row:
            by_pair.setdefault(row["pair"], {})[row["explanation"]] = row
    return [(two["faithful"], two["unfaithful"]) for two in by_pair.values() if len(two) == 2]


def _same_order(pairs: list[tuple[dict, dict]], count: int, variant: str) -> int:
    """Of `pairs` (`_both_roles`), those whose two explanations the variant with `count` cells verified orders as exact
    patching does."""
    return sum(
        bool(
            np.sign(f["curve"][str(count)][variant] - u["curve"][str(count)][variant])
            == np.sign(f["exact_scores"][variant] - u["exact_scores"][variant])
        )
        for f, u in pairs
    )


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
    for count, point in result["curve"].items():
        print(
            f"{count:>4} cells verified (median {point['median_verified']:.0f} distinct a pair): "
            + ", ".join(f"{v} mean |Δ| {point['mean_abs_gap'][v]:.3f}" for v in SCORES)
            + f"; sign changes {point['sign_changes']['caf']}; pairs ordered as exact "
            + ", ".join(f"{v} {point['same_order'][v]}/{point['pairs']}" for v in SCORES)
            + f"; {point['speedup']:.1f}x exact"
        )
    if out:
        save(rows, out)
        plot(rows, out.with_suffix(".png"))
        if result["curve"]:
            plot_curve(result["curve"], out.with_name(f"{out.stem}_cells.png"))


def save(rows: list[dict], out: Path) -> None:
    """Write the rows and their summary to `out`."""
    out.write_text(json.dumps({"rows": rows, "summary": summary(rows)}, indent=1) + "\n")


def plot(rows: list[dict], path: Path) -> None:
    """Spearman ρ per explanation (answer and explanation matrices) and CaF by attribution against exact CaF: with
    each count of verified cells of the rows' curve where they have one, else the two attribution paths."""
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
    if all("curve" in row for row in rows):
        for count in sorted(rows[0]["curve"], key=int):
            scores = [row["curve"][count]["caf"] for row in rows]
            right.scatter(exact, scores, s=12, alpha=0.7, label=f"{count} cells verified")
    else:
        for variant, marker in (("attribution", "o"), ("attribution_only", "x")):
            right.scatter(exact, [row["caf"][variant] for row in rows], marker=marker, label=variant.replace("_", " "))
    right.axline((0, 0), slope=1, color="grey", linewidth=0.8)
    right.axhline(0, color="grey", linewidth=0.4)
    right.axvline(0, color="grey", linewidth=0.4)
    right.set_xlabel("CaF, exact patching")
    right.set_ylabel("CaF, attribution patching")
    right.set_title("the score itself")
    right.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def plot_curve(curve: dict, path: Path) -> None:
    """By the number of cells verified: the variant's error against exact patching, the share of pairs whose two
    explanations it orders as exact patching does, and its speed-up."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = [int(k) for k in curve]
    at = np.arange(len(counts))
    first = curve[str(counts[0])]
    figure, (error, order, cost) = plt.subplots(1, 3, figsize=(14, 4))
    for variant in SCORES:
        error.plot(at, [curve[str(k)]["mean_abs_gap"][variant] for k in counts], marker="o", label=variant)
        shares = [curve[str(k)]["same_order"][variant] / curve[str(k)]["pairs"] for k in counts]
        order.plot(at, shares, marker="o", label=variant)
    error.set_ylabel("mean |score − exact score|")
    error.set_title(f"error ({first['explanations']} explanations)")
    order.set_ylim(0, 1.05)
    order.axhline(0.5, color="grey", linewidth=0.8, linestyle="--")
    order.set_ylabel("pairs ordered as exact patching orders them")
    order.set_title(f"faithful vs unfaithful ({first['pairs']} pairs)")
    cost.plot(at, [curve[str(k)]["speedup"] for k in counts], marker="o", color="black")
    cost.axhline(50, color="grey", linewidth=0.8, linestyle="--")
    cost.set_yscale("log")
    cost.set_yticks([10, 20, 50, 100], ["10×", "20×", "50×", "100×"])
    cost.set_ylabel("speed-up over exact patching")
    cost.set_title("cost")
    for axis in (error, order):
        axis.legend()
    for axis in (error, order, cost):
        axis.set_xticks(at, [str(k) for k in counts])
        axis.set_xlabel("cells verified per explanation")
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def _scores(matrix: np.ndarray) -> dict[str, float]:
    """`caf`, `caf_t` and `caf_l` of a [positions, layers, answer | explanation] causal matrix."""
    from recoe_causaldiag.metrics.causal_faithfulness import caf_scores

    scores = caf_scores(matrix[..., 0], matrix[..., 1], matrix[..., 0], matrix[..., 1])
    return {variant: float(scores[variant]) for variant in SCORES}


def main() -> None:
    import torch

    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.causal_faithfulness import (
        VERIFIED_CELLS,
        CausalFaithfulness,
        cells_to_verify,
        prepare,
    )
    from recoe_causaldiag.models import DEFAULT_MODEL, load_model
    from recoe_causaldiag.scoring import ScoringEngine

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--skip", type=int, default=0, help="leave out the first SKIP such pairs (a held-out set)")
    parser.add_argument("--verified-cells", type=int, default=VERIFIED_CELLS)
    parser.add_argument("--rounds", type=int, default=1, help="timings of each attribution path per pair (median kept)")
    parser.add_argument("--curve", default="", help="comma-separated numbers of cells verified, each run as a variant")
    parser.add_argument("--out", type=Path, help="JSON file the rows and the summary are written to, row by row")
    parser.add_argument("--report", type=Path, help="summarise and plot the rows of an --out file, computing nothing")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.report:
        report(json.loads(args.report.read_text())["rows"], args.report)
        return
    curve = sorted({int(k) for k in args.curve.split(",") if k.strip()})
    if any(k < 0 for k in curve):
        parser.error(f"--curve takes numbers of cells >= 0, got {args.curve}")

    lm = load_model(args.model)
    engine = ScoringEngine(lm, progress=False)
    pairs = patchable_pairs(engine, args.skip + args.pairs, {"require_flip": False})[args.skip :]
    metrics = {
        "exact": CausalFaithfulness(require_flip=False),
        "attribution": CausalFaithfulness(
            require_flip=False, patching="attribution", verified_cells=args.verified_cells
        ),
        "attribution_only": CausalFaithfulness(require_flip=False, patching="attribution", verified_cells=0),
    }
    curve_paths = {k: {0: "attribution_only", args.verified_cells: "attribution"}.get(k, f"cells={k}") for k in curve}
    for k, path in curve_paths.items():
        metrics.setdefault(path, CausalFaithfulness(require_flip=False, patching="attribution", verified_cells=k))
    timed_paths = list(metrics)[1:]
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
        found, timings = {}, {path: [] for path in metrics}
        for path in [PATHS[0]] + timed_paths * args.rounds:
            started = time.perf_counter()
            found[path] = [effects[0] for effects, _ in metrics[path].matrices(engine, layouts)]
            timings[path].append((time.perf_counter() - started) / len(layouts))
        seconds = {path: float(np.median(timings[path])) for path in PATHS}
        verified = {
            k: len({cell for m in found["attribution_only"] for cell in cells_to_verify(torch.from_numpy(m), k)})
            for k in curve
        }
        for index, ((role, _), lay) in enumerate(zip(roles, layouts, strict=True)):
            matrices = {path: found[path][index] for path in PATHS}
            rho = [
                float(spearmanr(matrices["exact"][..., j].ravel(), matrices["attribution_only"][..., j].ravel())[0])
                for j in (0, 1)
            ]
            caf = {path: _scores(m)["caf"] for path, m in matrices.items()}
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
            if curve:
                rows[-1]["exact_scores"] = _scores(matrices["exact"])
                rows[-1]["curve"] = {
                    str(k): _scores(found[path][index])
                    | {"seconds": float(np.median(timings[path])), "verified": verified[k]}
                    for k, path in curve_paths.items()
                }
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

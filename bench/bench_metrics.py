"""`make bench`, metrics: every registered per-instance metric on the same FactCheck pairs, through the scoring
engine and through the reference loop of the papers' code (`ReferenceEngine`: batch 1, the whole prompt per forward,
no prefix reuse; for CaF one forward per patch), each in a process of its own, measured in the same run (with
`--rounds N`, N times, the paths taking turns, and the ratio is that of their median times).

Printed per metric: pairs/s of both paths and their ratio against the issue's target, the largest difference of
any score between them (NaN where a score is NaN on one path only), the engine's achieved GFLOP/s and its share of
this machine's matmul peak in the model's precision (measured first, in this run: float32 on CPU, bfloat16 on
CUDA), each path's peak RSS and, on CUDA, each path's peak of allocated GPU memory. FLOPs are counted as 2 · (a
decoder layer's parameters) per input position through that layer (padding included: it is work done; a layer
replayed from a cached run is not) plus 2 · hidden · vocab per logit row computed, in the evaluated model and in the
simulator or helper model of a metric that has one; attention's quadratic term is left out, so the figure is a lower
bound.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

PATHS = ("engine", "reference")
TARGETS = {"filler_tokens": 5.0, "cc_shap": 10.0, "causal_faithfulness": 4.0}
DEFAULT_TARGET = 3.0
OPTIONS = {
    "cc_shap": {"n_samples": 4, "long_question_samples": 4},
    "causal_faithfulness": {"layers": (3, 9, 15, 21, 27), "require_flip": False},
}
"""Budgets that keep the reference loop affordable; both paths run with the same options."""
ORIGINAL = {"n_samples": 16, "long_question_samples": 16, "estimator": "sampling"}
"""The original code's CC-SHAP: 16 independent permutations per attribution, whatever the question's length."""
AGAINST_ORIGINAL = {
    "cc_shap": {
        "default vs original": ({"n_samples": 6, "estimator": "leverage"}, ORIGINAL),
        "equal error": ({"n_samples": 5, "estimator": "leverage"}, ORIGINAL),
    }
}
"""Metrics whose default estimator is not the papers': further rows time the engine with its estimator against the
reference loop at the original code's budget. Against the exact Shapley values (bench/cc_shap_convergence.py, README
"CC-SHAP: the estimator and its budget") the default's error is lower than the original's (0.085 against 0.101 on
the first 30 FactCheck pairs, 0.079 against 0.099 on the next 60), and Leverage SHAP at 5 is level with it (0.103
against 0.101, 0.093 against 0.099): the ratios at lower and at equal error. Both hold for questions of at most 10
tokens; a longer question gets Leverage SHAP at 16 (the metric's `long_question_samples`), whose seed-to-seed spread
is no larger than the permutations' there (bench/cc_shap_long_questions.py)."""
FEW_PAIRS = {"cc_shap": 1, "causal_faithfulness": 1}
"""Metrics whose reference loop is slow enough to need fewer pairs (the ratio does not depend on the count)."""


def matmul_peak(device: torch.device, dtype: torch.dtype, repeats: int = 5) -> float:
    """The machine's measured matmul rate in GFLOP/s on `device` in `dtype` (best of `repeats`), the precision the
    model runs in there (float32 on CPU, bfloat16 on CUDA)."""
    size = 2048 if device.type == "cpu" else 8192
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    synchronize = torch.cuda.synchronize if device.type == "cuda" else lambda: None
    a @ b
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        synchronize()
        best = min(best, time.perf_counter() - started)
    return 2 * size**3 / best / 1e9


class WorkCounter:
    """Input positions through each decoder layer and logit rows through the output head, counted by forward hooks
    (a layer that a patched run replays instead of computing, `activation_patching.replayed`, is not counted)."""

    def __init__(self, model: torch.nn.Module) -> None:
        from recoe_causaldiag.mechanisms.activation_patching import decoder_layers

        self.layer_work = self.rows = 0
        head = model.get_output_embeddings()
        self.head_size = head.weight.numel()
        for layer in decoder_layers(model):
            size = sum(p.numel() for p in layer.parameters())
            layer.register_forward_pre_hook(
                lambda _m, args, kwargs, size=size: self._count(size, args, kwargs), with_kwargs=True
            )
        head.register_forward_pre_hook(self._count_rows)

    def _count(self, size: int, args, kwargs) -> None:
        hidden = args[0] if args else kwargs["hidden_states"]
        self.layer_work += size * hidden[..., 0].numel()

    def _count_rows(self, _module, args) -> None:
        self.rows += args[0][..., 0].numel()

    @property
    def flops(self) -> float:
        return 2.0 * (self.layer_work + self.head_size * self.rows)


def worker(metric_name: str, path: str, pairs: int, model: str, warm: bool, options: dict) -> dict:
    """One metric on one path in this process: seconds, work done and scores (the model loaded before timing)."""
    from recoe_causaldiag import scoring
    from recoe_causaldiag.metrics import METRICS
    from recoe_causaldiag.models import load_model
    from recoe_causaldiag.packaged_models import default_helper_model
    from recoe_causaldiag.reference_engine import ReferenceEngine
    from recoe_causaldiag.scoring import ScoringEngine
    from recoe_causaldiag.task_pairs import iter_task_pairs

    metric_class = METRICS.get(metric_name)
    lm = load_model(model)
    engine_class = ScoringEngine if path == "engine" else ReferenceEngine
    engine = engine_class(lm, progress=False)
    if metric_name == "causal_faithfulness":
        scored_pairs = patchable_pairs(ScoringEngine(lm, progress=False), pairs, options)
    else:
        (task,) = iter_task_pairs(("factcheck",), limit=pairs, seed=0)
        scored_pairs = task.pairs
    models = [lm.model]
    if metric_class.helper_option is not None:
        helper = load_model(default_helper_model(lm.name))
        scoring.share_engine(engine_class(helper, progress=engine.progress))
        models.append(helper.model)
    metric = metric_class(**options)
    if warm:  # fills the helper's disk cache; the timed run gets a fresh engine, so no label memo carries over
        metric.score(scored_pairs, engine_class(lm, progress=False))
    counters = [WorkCounter(model) for model in models]
    if lm.model.device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    started = time.perf_counter()
    scores = metric.score(scored_pairs, engine)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "gpu_mb": torch.cuda.max_memory_allocated() / 2**20 if lm.model.device.type == "cuda" else None,
        "pairs": len(scored_pairs),
        "flops": sum(counter.flops for counter in counters),
        "scores": {s.variant: [*map(float, s.faithful), *map(float, s.unfaithful)] for s in scores},
    }


def patchable_pairs(engine, pairs: int, options: dict) -> list:
    """The first `pairs` FactCheck pairs (seeded order) whose both explanations CaF can patch: most have no usable
    counterfactual with this model, and a NaN-only pair would time the label queries alone."""
    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.causal_faithfulness import prepare
    from recoe_causaldiag.task_pairs import iter_task_pairs

    (task,) = iter_task_pairs(("factcheck",), limit=200, seed=0)
    found = []
    for pair in task.pairs:
        instances = [Instance.from_pair(pair, e) for e in (pair.explanation_faithful, pair.explanation_unfaithful)]
        probs = engine.label_probs([label_request(i) for i in instances])
        layouts = [
            prepare(engine, i, int(np.argmax(p)), require_flip=options["require_flip"])[1]
            for i, p in zip(instances, probs, strict=True)
        ]
        if all(layout is not None for layout in layouts):
            found.append(pair)
        if len(found) == pairs:
            return found
    raise SystemExit(f"only {len(found)} of 200 FactCheck pairs are patchable; asked for {pairs}")


def measured(metric: str, path: str, pairs: int, model: str, options: dict) -> tuple[dict, float]:
    """A worker's result and its process's peak RSS in MB."""
    command = [sys.executable, __file__, "--worker", metric, "--path", path, "--pairs", str(pairs), "--model", model]
    command += ["--options", json.dumps(options)]
    if metric in ("adding_mistakes", "paraphrasing") and path == "engine":
        command.append("--warm")  # the helper's rewrites are cached on disk: both paths time a warm cache
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    out = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"{metric} ({path}) failed with status {status}")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss / 1024


def largest_difference(a: dict[str, list[float]], b: dict[str, list[float]]) -> float:
    """max |Δscore| over every variant's scores; NaN when one path scored a pair the other did not."""
    gaps = []
    for variant in a:
        x, y = np.array(a[variant]), np.array(b[variant])
        if not np.array_equal(np.isnan(x), np.isnan(y)):
            return float("nan")
        finite = ~np.isnan(x)
        gaps.append(float(np.max(np.abs(x[finite] - y[finite]), initial=0.0)))
    return max(gaps, default=0.0)


def main() -> None:
    from recoe_causaldiag.metrics import METRICS
    from recoe_causaldiag.models import DEFAULT_MODEL, default_device, default_dtype

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=4, help="FactCheck pairs per metric (fewer for CC-SHAP and CaF)")
    parser.add_argument("--metric", default="all", help="comma-separated metrics or 'all'")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="times each path is measured, the paths taking turns; with more than one, the ratio is the medians' and "
        "the range of the rounds' ratios is printed beside it",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--path", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--warm", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--options", type=json.loads, default={}, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be at least 1, got {args.rounds}")
    if args.worker:
        print(json.dumps(worker(args.worker, args.path, args.pairs, args.model, args.warm, args.options)))
        return
    names = (
        [n for n in METRICS.names() if METRICS.get(n).uses_model] if args.metric == "all" else args.metric.split(",")
    )
    device = default_device()
    dtype = default_dtype(device)
    peak = matmul_peak(device, dtype)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} CPU threads"
    print(f"model {args.model} on {where}; {str(dtype)[6:]} matmul peak {peak:.1f} GFLOP/s (measured)")
    header = (
        f"{'metric':<20} {'pairs':>5} {'engine p/s':>10} {'ref p/s':>9} {'ratio':>7} {'target':>6} "
        f"{'max|Δscore|':>11} {'GFLOP/s':>8} {'of peak':>7} {'RSS eng':>8} {'RSS ref':>8}"
    )
    print(header)
    for name in names:
        pairs = min(args.pairs, FEW_PAIRS.get(name, args.pairs))
        options = OPTIONS.get(name, {})
        fast, slow = in_turns(name, pairs, args.model, (options, options), args.rounds)
        print_row(name, pairs, fast, slow, peak, largest_difference(fast[0][0]["scores"], slow[0][0]["scores"]))
        for label, compared in AGAINST_ORIGINAL.get(name, {}).items():
            fast, slow = in_turns(name, pairs, args.model, compared, args.rounds)
            print_row(f"{name}, {label}", pairs, fast, slow, peak, None)


def in_turns(
    metric: str, pairs: int, model: str, options: tuple[dict, dict], rounds: int
) -> tuple[list[tuple[dict, float]], list[tuple[dict, float]]]:
    """Each path measured `rounds` times (`measured`), engine then reference in every round, so that a change in the
    machine's speed during the run reaches both paths alike."""
    results: dict[str, list[tuple[dict, float]]] = {path: [] for path in PATHS}
    for _ in range(rounds):
        for path, path_options in zip(PATHS, options):
            results[path].append(measured(metric, path, pairs, model, path_options))
    return results["engine"], results["reference"]


def print_row(
    label: str,
    pairs: int,
    fast: list[tuple[dict, float]],
    slow: list[tuple[dict, float]],
    peak: float,
    difference: float | None,
) -> None:
    """One metric's line: pairs/s of both paths (at their median time over the rounds), their ratio against the
    target and, over more than one round, the range of the rounds' ratios; max |Δscore| (None: the paths ran
    different estimators, so their scores are not comparable), achieved GFLOP/s and each path's highest peak RSS."""
    fast_seconds, slow_seconds = (float(np.median([run["seconds"] for run, _ in path])) for path in (fast, slow))
    ratio = slow_seconds / fast_seconds
    target = TARGETS.get(label.split(",")[0], DEFAULT_TARGET)
    achieved = fast[0][0]["flops"] / fast_seconds / 1e9
    verdict = "ok" if ratio >= target else "BELOW"
    if not any(np.isfinite(v).any() for v in map(np.array, fast[0][0]["scores"].values())):
        verdict = "ALL NaN: nothing scored, ratio meaningless"
    shown = "estimators" if difference is None else f"{difference:.2e}"
    rounds = [s["seconds"] / f["seconds"] for (f, _), (s, _) in zip(fast, slow)]
    spread = f"  (rounds {min(rounds):.1f}-{max(rounds):.1f}x)" if len(rounds) > 1 else ""
    fast_rss, slow_rss = (max(rss for _, rss in path) for path in (fast, slow))
    print(
        f"{label:<20} {pairs:>5} {pairs / fast_seconds:>10.3f} {pairs / slow_seconds:>9.3f} "
        f"{ratio:>6.1f}x {target:>5.0f}x {shown:>11} "
        f"{achieved:>8.1f} {achieved / peak:>6.0%} {fast_rss:>6.0f}MB {slow_rss:>6.0f}MB  {verdict}{spread}"
        f"{gpu_memory(fast[0][0], slow[0][0])}"
    )


def gpu_memory(fast: dict, slow: dict) -> str:
    """Each path's peak of allocated GPU memory while scoring, where it ran on CUDA."""
    if fast["gpu_mb"] is None:
        return ""
    return f"  (GPU peak {fast['gpu_mb']:.0f} / {slow['gpu_mb']:.0f} MB)"


if __name__ == "__main__":
    main()

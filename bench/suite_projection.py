"""How long `causaldiag run --task … --metric all --limit N` would take on this machine, projected from the work its
own sampled pairs need and from rates measured here on a few of them, for runs too long to time whole.

CC-SHAP, most of the suite's time, costs its coalitions. For every sampled pair (both explanations, and the
swapped-roles control where the task has one, as `run` scores them) the coalitions its seeded estimator draws are
recorded without a forward (`CCShap.recorded_plans`) and packed as the engine packs them (`packed_rows`, one tree per
prefix); their tokens are the work counted. CC-SHAP is then timed on the first `--measure` pairs of each task, and
each task's projection is its counted tokens at the seconds per token measured on that task (its rows' lengths, and
so their attention, differ by task). CaF patches only the instances whose counterfactual flips the model's answer
(`require_flip`, the default): those are counted on every sampled pair, and one pair with such instances is timed.
Every other metric is read from a finished run of it (`--others`, a results JSON on a smaller sample of the same
tasks), its seconds scaled by the number of pairs; CaF's seconds there must be label queries alone (a run in which
it patched some pair is refused). Model loading and the controls are left out. The whole dataset's projection scales
the sample's mean per pair, with a bootstrap interval over the sampled pairs' CC-SHAP tokens (the measured rates
taken as exact). `--rates` reuses the rates of an earlier projection's JSON, measured on this machine, instead of
timing: the work is counted afresh (after a change of budget, say) and nothing is timed. Prints a table; `--out`
writes the figures as JSON.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

TASKS = ("factcheck", "analogy", "object_counting", "multihop")


@dataclass(frozen=True)
class TaskSample:
    """One task's sampled pairs as `run` scores them: each pair's instances (both explanations, in both directions
    where the roles swap)."""

    task: str
    pairs: int
    available: int
    instances: tuple[tuple, ...]

    @property
    def instances_per_pair(self) -> int:
        return len(self.instances[0]) if self.instances else 0

    def flat(self) -> list:
        """Every sampled instance, pair after pair."""
        return [instance for pair in self.instances for instance in pair]


def task_sample(task_name: str, data_dir: Path | None, limit: int, seed: int) -> TaskSample:
    from recoe_causaldiag.api import Instance
    from recoe_causaldiag.api.task import task_registry
    from recoe_causaldiag.task_pairs import iter_task_pairs

    (selected,) = iter_task_pairs((task_name,), data_dir, limit=limit, seed=seed)
    (every,) = iter_task_pairs((task_name,), data_dir)
    task = task_registry().get(task_name)

    def both_explanations(pair) -> tuple:
        return tuple(Instance.from_pair(pair, e) for e in (pair.explanation_faithful, pair.explanation_unfaithful))

    instances = tuple(
        both_explanations(pair) + (both_explanations(task.swapped_roles(pair)) if task.roles_swappable else ())
        for pair in selected.pairs
    )
    return TaskSample(task_name, len(selected.pairs), len(every.pairs), instances)


def packed_tokens(requests: Sequence, max_tokens: int) -> int:
    """The tokens of `requests` once the continuations of each prefix (under each edit state) are packed as trees:
    the positions the engine's forwards compute, padding left out."""
    from recoe_causaldiag.packed_rows import packed_rows

    groups: dict[tuple, dict[int, tuple[int, ...]]] = defaultdict(dict)
    for index, request in enumerate(requests):
        groups[request.state, request.prefix][index] = request.continuation
    return sum(len(row.tokens) for group in groups.values() for row in packed_rows(group, max_tokens))


def cc_shap_work(metric, engine, sample: TaskSample) -> list[int]:
    """Packed coalition tokens per sampled pair."""
    plans = metric.recorded_plans(sample.flat(), engine)
    per_pair = sample.instances_per_pair
    work = []
    for k in range(sample.pairs):
        requests = [
            request
            for plan in plans[k * per_pair : (k + 1) * per_pair]
            for attribution in plan.values()
            if attribution is not None
            for request in attribution.forward.requests()
        ]
        work.append(packed_tokens(requests, engine.max_packed_tokens))
    return work


def patched_instances(engine, sample: TaskSample) -> list[int]:
    """Per sampled pair, the instances CaF patches under its defaults (their counterfactual flips the answer)."""
    from recoe_causaldiag.mechanisms.prompting import label_request
    from recoe_causaldiag.metrics.causal_faithfulness import prepare

    probs = engine.label_probs([label_request(i) for i in sample.flat()], desc="answers")
    per_pair = sample.instances_per_pair
    found = []
    for k, pair in enumerate(sample.instances):
        labels = probs[k * per_pair : (k + 1) * per_pair]
        found.append(sum(prepare(engine, i, int(np.argmax(p)))[1] is not None for i, p in zip(pair, labels)))
    return found


def timed(metric, lm, instances: Sequence) -> float:
    """Seconds the metric takes on `instances` with a fresh engine (no label memo carried over)."""
    from recoe_causaldiag.scoring import ScoringEngine

    engine = ScoringEngine(lm, progress=False)
    started = time.perf_counter()
    metric.score_instances(list(instances), engine)
    return time.perf_counter() - started


def other_seconds(path: Path) -> tuple[dict[str, int], dict[str, dict[str, float]]]:
    """A finished run's pairs per task, and its seconds per task and metric (the same for every variant)."""
    document = json.loads(path.read_text())
    fields = ("score_faithful", "score_unfaithful", "score_faithful_swap", "score_unfaithful_swap")
    for row in document["pairs"]:
        if row["metric"] == "causal_faithfulness" and any(row.get(f) is not None for f in fields):
            raise SystemExit(f"{path}: CaF patched {row['task']} pair {row['pair_id']}; its seconds are not queries")
    seconds: dict[str, dict[str, float]] = defaultdict(dict)
    for result in document["results"]:
        seconds[result["task"]][result["metric"]] = result["seconds"]
    pairs: dict[str, set[str]] = defaultdict(set)
    for row in document["pairs"]:
        pairs[row["task"]].add(row["pair_id"])
    return {task: len(ids) for task, ids in pairs.items()}, seconds


def main() -> None:
    from recoe_causaldiag.metrics import METRICS
    from recoe_causaldiag.models import DEFAULT_MODEL, load_model
    from recoe_causaldiag.scoring import ScoringEngine
    from recoe_causaldiag.statistics import bootstrap_ci

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=100, help="pairs per task, the run's --limit")
    parser.add_argument("--task", default=",".join(TASKS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--measure", type=int, default=1, help="pairs per task on which CC-SHAP is timed")
    parser.add_argument("--others", type=Path, help="a finished run of the other metrics, same model and tasks")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--rates", type=Path, help="an earlier projection's JSON whose measured rates to reuse")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.measure < 1:
        parser.error(f"--measure must be at least 1, got {args.measure}")

    lm = load_model(args.model)
    engine = ScoringEngine(lm, progress=False)
    cc_shap, caf = METRICS.get("cc_shap")(), METRICS.get("causal_faithfulness")()
    others_pairs, others = other_seconds(args.others) if args.others else ({}, {})
    stored = {row["task"]: row for row in json.loads(args.rates.read_text())["tasks"]} if args.rates else {}
    figures = []
    for task in args.task.split(","):
        sample = task_sample(task, args.data_dir, args.limit, args.seed)
        started = time.perf_counter()
        work = cc_shap_work(cc_shap, engine, sample)
        counting = time.perf_counter() - started
        patched = patched_instances(engine, sample)
        first = next((k for k, count in enumerate(patched) if count), None)
        if args.rates:
            if task not in stored:
                raise SystemExit(f"{args.rates} holds no rates for {task}")
            measured, rate = [], stored[task]["cc_shap_seconds_per_token"]
            patch_rate = stored[task]["caf_seconds_per_patched_instance"]
            if first is not None and patch_rate is None:
                raise SystemExit(f"{args.rates}: CaF patched nothing on {task} there, here it does")
        else:
            measured = [timed(cc_shap, lm, pair) for pair in sample.instances[: args.measure]]
            rate = sum(measured) / sum(work[: len(measured)])
            patch_rate = None if first is None else timed(caf, lm, sample.instances[first]) / patched[first]
        row = {
            "task": task,
            "pairs": sample.pairs,
            "instances_per_pair": sample.instances_per_pair,
            "cc_shap_tokens": work,
            "cc_shap_measured_seconds": measured,
            "cc_shap_seconds_per_token": rate,
            "cc_shap_projected_seconds": rate * sum(work),
            "dataset_pairs": sample.available,
            "cc_shap_dataset_seconds": [rate * sample.available * m for m in (np.mean(work), *bootstrap_ci(work))],
            "counting_seconds": counting,
            "caf_patched_instances": patched,
            "caf_seconds_per_patched_instance": patch_rate,
        }
        if task in others:
            scale = sample.pairs / others_pairs[task]
            seconds = {m: s * scale for m, s in others[task].items() if m not in ("cc_shap", "causal_faithfulness")}
            caf_queries = others[task].get("causal_faithfulness", 0.0) * scale
            seconds["causal_faithfulness"] = caf_queries + (patch_rate or 0.0) * sum(patched)
            row["others_projected_seconds"] = seconds
        figures.append(row)
        print(json.dumps({k: v for k, v in row.items() if not isinstance(v, list)}), flush=True)

    print(f"\n{args.limit} pairs per task, {args.model}; h = hours on this machine:\n")
    print(
        "| task | pairs | CC-SHAP packed tokens a pair, mean (range) | CC-SHAP ms a token (timed pairs, or --rates) "
        "| CC-SHAP h | CaF patched instances | others h | all h | whole dataset: pairs, h (95% interval) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    total = [0.0, 0.0, 0.0, 0.0]
    for row in figures:
        tokens = np.array(row["cc_shap_tokens"])
        rates = [1e3 * s / t for s, t in zip(row["cc_shap_measured_seconds"], tokens)] or [
            1e3 * row["cc_shap_seconds_per_token"]
        ]
        others = sum(row.get("others_projected_seconds", {}).values())
        whole = [s + others * row["dataset_pairs"] / row["pairs"] for s in row["cc_shap_dataset_seconds"]]
        hours = (row["cc_shap_projected_seconds"] + others) / 3600
        total = [a + b for a, b in zip(total, [hours, *(w / 3600 for w in whole)])]
        print(
            f"| {row['task']} | {row['pairs']} | {int(tokens.mean()):,} ({tokens.min():,}–{tokens.max():,}) "
            f"| {', '.join(f'{r:.2f}' for r in rates)} | {row['cc_shap_projected_seconds'] / 3600:.2f} "
            f"| {sum(row['caf_patched_instances'])} | {others / 3600:.2f} | {hours:.2f} "
            f"| {row['dataset_pairs']}: {whole[0] / 3600:.1f} ({whole[1] / 3600:.1f}–{whole[2] / 3600:.1f}) |"
        )
    print(f"\nall tasks: {total[0]:.2f} h; every pair of every task: {total[1]:.1f} h ({total[2]:.1f}–{total[3]:.1f})")
    if args.out:
        document = {"limit": args.limit, "model": args.model, "rates_from": args.rates and str(args.rates)}
        args.out.write_text(json.dumps(document | {"tasks": figures}, indent=1) + "\n")


if __name__ == "__main__":
    main()

"""A diagnosticity run: one model, loaded once, over tasks × metrics, with statistics and per-pair records."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from . import __version__, prompts
from .hub_layout import load_pairs, read_manifest, task_dataset_dir
from .metrics import METRICS
from .models import LanguageModel, load_model
from .paths import cache_root
from .api.records import PairRecord
from .api.registry import UnknownNameError
from .scoring import ScoringEngine
from .statistics import diagnosticity, edit_reliability, pairwise_d
from .tasks import DATASET_VERSION, TASKS

SCHEMA_VERSION = "1.0"
EDITORS = ("ice",)
EXPLANATION_SOURCES = ("synthetic", "generated")


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run's numbers; written into every results file."""

    model: str
    tasks: tuple[str, ...]
    metrics: tuple[str, ...]
    limit: int | None = None
    editor: str = "ice"
    explanations: str = "synthetic"
    seed: int = 0
    batch_size: int = 32
    n_resamples: int = 2000
    max_explanation_tokens: int = 48
    metric_options: tuple[tuple[str, str, Any], ...] = ()

    def __post_init__(self) -> None:
        for task in self.tasks:
            TASKS.get(task)
        for metric in self.metrics:
            METRICS.get(metric)
        for metric, key, _ in self.metric_options:
            if metric not in self.metrics:
                raise ValueError(f"option {metric}.{key} names a metric that this run does not compute")
            if key not in inspect.signature(METRICS.get(metric)).parameters:
                known = ", ".join(inspect.signature(METRICS.get(metric)).parameters) or "none"
                raise ValueError(f"metric {metric} has no option '{key}' (options: {known})")
        for metric in dict.fromkeys(name for name, _, _ in self.metric_options):
            try:
                METRICS.get(metric)(**self.options_for(metric))
            except TypeError as err:
                raise ValueError(f"bad option for metric {metric}: {err}") from err
        if self.editor not in EDITORS:
            raise UnknownNameError("editor", self.editor, list(EDITORS))
        if self.explanations not in EXPLANATION_SOURCES:
            raise UnknownNameError("explanation source", self.explanations, list(EXPLANATION_SOURCES))
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")

    def options_for(self, metric: str) -> dict[str, Any]:
        """Keyword arguments of `metric`'s constructor in this run (sample budgets, helper models, ...)."""
        return {key: value for name, key, value in self.metric_options if name == metric}


def parse_metric_option(text: str) -> tuple[str, str, Any]:
    """`METRIC.KEY=VALUE` → (metric, key, value); the value is read as a Python literal (`2`, `(14, 15)`,
    `'smollm2-135m-instruct'`) and otherwise kept as text."""
    name, sep, value = text.partition("=")
    metric, dot, key = name.strip().partition(".")
    if not (sep and dot and metric and key.isidentifier()):
        raise ValueError(f"metric option '{text}' is not of the form METRIC.KEY=VALUE")
    try:
        parsed = ast.literal_eval(value.strip())
    except (ValueError, SyntaxError):
        parsed = value.strip()
    return metric, key, parsed


def select_pairs(pairs: Sequence[PairRecord], limit: int | None, seed: int) -> list[PairRecord]:
    """A seeded sample of `limit` pairs (all when no limit), kept in dataset order."""
    if limit is None or limit >= len(pairs):
        return list(pairs)
    keep = sorted(random.Random(seed).sample(range(len(pairs)), limit))
    return [pairs[i] for i in keep]


def with_generated_explanations(pairs: Sequence[PairRecord], engine: ScoringEngine, max_new_tokens: int
                                ) -> list[PairRecord]:
    """Pairs whose explanations are the CoT generations of M̄ (edits) and M̃ (counter edits) (§5.5), each cut
    before the answer cue ("The best answer is:") that the CoT prompt adds back when the explanation is scored."""
    requests = [prompts.cot_generation(edits, p.question) for p in pairs for edits in (p.edits, p.counter_edits)]
    texts = [text.split(prompts.COT_ANSWER_CUE)[0].strip()
             for text in engine.generate(requests, max_new_tokens=max_new_tokens)]
    return [dataclasses.replace(p, explanation_faithful=texts[2 * i], explanation_unfaithful=texts[2 * i + 1])
            for i, p in enumerate(pairs)]


def explanation_perplexities(pairs: Sequence[PairRecord], engine: ScoringEngine) -> tuple[np.ndarray, np.ndarray]:
    """Perplexity of each pair's faithful and unfaithful explanation under the evaluated model's edits."""
    requests = [prompts.cot_explanation(p.edits, p.question, e)
                for p in pairs for e in (p.explanation_faithful, p.explanation_unfaithful)]
    ppl = engine.perplexity(requests, desc="edit reliability")
    return ppl[0::2], ppl[1::2]


def run(spec: RunSpec, *, lm: LanguageModel | None = None, data_dir: Path | None = None,
        progress: bool = True) -> dict[str, Any]:
    """Compute the results document (SPEC §8) of one run."""
    data_dir = Path(data_dir) if data_dir else cache_root() / "datasets" / DATASET_VERSION
    lm = lm or load_model(spec.model)
    engine = ScoringEngine(lm, batch_size=spec.batch_size, progress=progress)
    results, reliability, pair_rows, versions = [], [], [], {}
    for task in tqdm(spec.tasks, desc="tasks", disable=not progress or len(spec.tasks) == 1):
        folder, config = task_dataset_dir(task, data_dir)
        versions[task] = read_manifest(folder)["version"]
        pairs = select_pairs(load_pairs(folder, config), spec.limit, spec.seed)
        if spec.explanations == "generated":
            pairs = with_generated_explanations(pairs, engine, spec.max_explanation_tokens)
        ppl_faithful, ppl_unfaithful = explanation_perplexities(pairs, engine)
        est = edit_reliability(ppl_faithful, ppl_unfaithful, n_resamples=spec.n_resamples, seed=spec.seed)
        reliability.append({"task": task, "value": est.value, "ci_low": est.ci_low, "ci_high": est.ci_high, "n": est.n})
        for name in spec.metrics:
            started = time.perf_counter()
            scored = METRICS.get(name)(**spec.options_for(name)).score(pairs, engine)
            seconds = time.perf_counter() - started
            for variant in scored:
                est = diagnosticity(variant.faithful, variant.unfaithful, n_resamples=spec.n_resamples, seed=spec.seed)
                results.append({"task": task, "metric": name, "variant": variant.variant, "diagnosticity": est.value,
                                "ci_low": est.ci_low, "ci_high": est.ci_high, "p_value": est.p_value, "n": est.n,
                                "n_valid": est.n_valid, "n_nan": est.n_nan, "seconds": seconds})
                d = pairwise_d(variant.faithful, variant.unfaithful)
                pair_rows += [{"id": p.id, "task": task, "metric": name, "variant": variant.variant,
                               "score_faithful": _number(f), "score_unfaithful": _number(u), "d": _number(di)}
                              for p, f, u, di in zip(pairs, variant.faithful, variant.unfaithful, d)]
    return {
        "schema_version": SCHEMA_VERSION,
        "model": {"name": lm.name, "revision": lm.revision, "dtype": lm.dtype, "device": str(lm.device)},
        "editor": spec.editor,
        "explanations": spec.explanations,
        "dataset_versions": versions,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "run_spec": {**dataclasses.asdict(spec), "package_version": __version__},
        "results": results,
        "edit_reliability": reliability,
        "pairs": pair_rows,
    }


def _number(value: float) -> float | None:
    """JSON has no NaN: an unscored value is written as null."""
    return None if np.isnan(value) else float(value)

"""A diagnosticity run: one model, loaded once, over tasks × metrics. Each task's pairs (`iter_task_pairs`) are
scored by every metric, the scores become per-pair rows (`PairScoreRow`) and the rows become statistics; the
results document records the run spec resolved to what ran, so that it can be rerun exactly."""

from __future__ import annotations

import ast
import dataclasses
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from . import __version__, prompts
from .api.metric import metric_registry
from .api.records import PairRecord
from .api.rows import PairScoreRow
from .api.run_spec import DatasetIdentity, RunSpec
from .models import LanguageModel, load_model
from .scoring import ScoringEngine
from .statistics import Estimate, diagnosticity_from_d, edit_reliability
from .task_pairs import TaskPairs, iter_task_pairs

SCHEMA_VERSION = "1.1"
"""1.1: per-pair rows name their pair `pair_id` (1.0: `id`, still read) and `run_spec` is resolved to what ran."""


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


def load_run_model(spec: RunSpec) -> LanguageModel:
    """The model of a spec, loaded with its requested revision, precision and device (a pinned spec's recorded
    ones: a hub model's commit, the dtype and the device that ran)."""
    revision, precision, device = spec.model_to_load()
    dtype = None if precision == "auto" else getattr(torch, precision)
    return load_model(spec.model, revision=revision, dtype=dtype, device=device)


def with_generated_explanations(
    pairs: Sequence[PairRecord], engine: ScoringEngine, max_new_tokens: int
) -> list[PairRecord]:
    """Pairs whose explanations are the CoT generations of M̄ (edits) and M̃ (counter edits) (§5.5), each cut
    before the answer cue ("The best answer is:") that the CoT prompt adds back when the explanation is scored."""
    requests = [prompts.cot_generation(edits, p.question) for p in pairs for edits in (p.edits, p.counter_edits)]
    texts = [
        text.split(prompts.COT_ANSWER_CUE)[0].strip()
        for text in engine.generate(requests, max_new_tokens=max_new_tokens)
    ]
    return [
        dataclasses.replace(p, explanation_faithful=texts[2 * i], explanation_unfaithful=texts[2 * i + 1])
        for i, p in enumerate(pairs)
    ]


def explanation_perplexities(pairs: Sequence[PairRecord], engine: ScoringEngine) -> tuple[np.ndarray, np.ndarray]:
    """Perplexity of each pair's faithful and unfaithful explanation under the evaluated model's edits."""
    requests = [
        prompts.cot_explanation(p.edits, p.question, e)
        for p in pairs
        for e in (p.explanation_faithful, p.explanation_unfaithful)
    ]
    ppl = engine.perplexity(requests, desc="edit reliability")
    return ppl[0::2], ppl[1::2]


@dataclass(frozen=True)
class TaskScores:
    """One task of a run, scored: the data its pairs came from, the edit reliability of their explanations, the
    statistics of every metric variant (SPEC §8 result entries) and the per-pair rows those statistics come from."""

    dataset: DatasetIdentity
    edit_reliability: dict[str, Any]
    results: tuple[dict[str, Any], ...]
    rows: tuple[PairScoreRow, ...]


def _estimate_fields(estimate: Estimate) -> dict[str, Any]:
    return {
        "diagnosticity": estimate.value,
        "ci_low": estimate.ci_low,
        "ci_high": estimate.ci_high,
        "p_value": estimate.p_value,
        "n": estimate.n,
        "n_valid": estimate.n_valid,
        "n_nan": estimate.n_nan,
    }


def score_task(spec: RunSpec, task_pairs: TaskPairs, engine: ScoringEngine) -> TaskScores:
    """Edit reliability and every metric of the spec on one task's pairs: scores → rows → statistics."""
    if spec.explanations == "generated":
        generated = with_generated_explanations(task_pairs.pairs, engine, spec.max_explanation_tokens)
        task_pairs = dataclasses.replace(task_pairs, pairs=tuple(generated))
    ppl_faithful, ppl_unfaithful = explanation_perplexities(task_pairs.pairs, engine)
    est = edit_reliability(ppl_faithful, ppl_unfaithful, n_resamples=spec.n_resamples, seed=spec.seed)
    reliability = {
        "task": task_pairs.task,
        "value": est.value,
        "ci_low": est.ci_low,
        "ci_high": est.ci_high,
        "n": est.n,
    }
    results: list[dict[str, Any]] = []
    rows: list[PairScoreRow] = []
    for name in spec.metrics:
        started = time.perf_counter()
        scored = metric_registry().get(name)(**spec.options_for(name)).score(task_pairs.pairs, engine)
        seconds = time.perf_counter() - started
        for variant in scored:
            variant_rows = task_pairs.score_rows(name, variant)
            est = diagnosticity_from_d([row.d for row in variant_rows], n_resamples=spec.n_resamples, seed=spec.seed)
            results.append(
                {
                    "task": task_pairs.task,
                    "metric": name,
                    "variant": variant.variant,
                    **_estimate_fields(est),
                    "seconds": seconds,
                }
            )
            rows += variant_rows
    return TaskScores(task_pairs.dataset, reliability, tuple(results), tuple(rows))


def score_tasks(
    spec: RunSpec, engine: ScoringEngine, data_dir: Path | None = None, *, progress: bool = False
) -> Iterator[TaskScores]:
    """Every task of the spec scored in turn (a pinned spec refuses data other than what it records)."""
    every_task = iter_task_pairs(spec.tasks, data_dir, limit=spec.limit, seed=spec.seed)
    for task_pairs in tqdm(
        every_task, desc="tasks", total=len(spec.tasks), disable=not progress or len(spec.tasks) == 1
    ):
        spec.check_dataset(task_pairs.dataset)
        yield score_task(spec, task_pairs, engine)


@dataclass(frozen=True)
class ScoredRun:
    """A finished run: its spec resolved to what ran, and each task's scores."""

    spec: RunSpec
    tasks: tuple[TaskScores, ...]

    def document(self) -> dict[str, Any]:
        """The results document (SPEC §8); NaN stays NaN until it is written (`report.write_results`)."""
        identity = self.spec.model_identity
        return {
            "schema_version": SCHEMA_VERSION,
            "model": dataclasses.asdict(identity) if identity else None,
            "editor": self.spec.editor,
            "explanations": self.spec.explanations,
            "dataset_versions": {dataset.task: dataset.version for dataset in self.spec.datasets},
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "run_spec": self.spec.to_dict(),
            "results": [result for task in self.tasks for result in task.results],
            "edit_reliability": [task.edit_reliability for task in self.tasks],
            "pairs": [row.to_json() for task in self.tasks for row in task.rows],
        }


def score_run(
    spec: RunSpec, *, lm: LanguageModel | None = None, data_dir: Path | None = None, progress: bool = True
) -> ScoredRun:
    """Score every task of the spec with one model (loaded here unless given); a pinned spec runs only on the
    model and the data it records."""
    lm = lm or load_run_model(spec)
    spec.check_model(lm.identity)
    engine = ScoringEngine(lm, batch_size=spec.batch_size, progress=progress)
    tasks = tuple(score_tasks(spec, engine, data_dir, progress=progress))
    return ScoredRun(spec.resolved(lm.identity, [task.dataset for task in tasks], __version__), tasks)


def run(
    spec: RunSpec, *, lm: LanguageModel | None = None, data_dir: Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """Compute the results document (SPEC §8) of one run."""
    return score_run(spec, lm=lm, data_dir=data_dir, progress=progress).document()

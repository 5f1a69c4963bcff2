"""A diagnosticity run: one model, loaded once, over tasks × metrics. Each task's pairs (`iter_task_pairs`) are
scored by every metric, the scores become per-pair rows (`PairScoreRow`) and the rows become statistics; the
results document records the run spec resolved to what ran, so that it can be rerun exactly."""

from __future__ import annotations

import ast
import dataclasses
import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from . import __version__
from .api.instance import VariantScores
from .api.metric import Metric, metric_registry
from .api.records import PairRecord
from .api.rows import PairControlRow, PairScoreRow
from .api.run_spec import DatasetIdentity, RunSpec
from .api.task import task_registry
from .checkpoints import Checkpoint, scored_pair_ids
from .controls import Estimator, accuracy_entry, control_rows, edit_quality_entry, reliability_entry
from .editors.editing import Editor, WeightEditor, make_editor
from .editors.quality import EditQualityRow, edit_quality
from .generated_explanations import generation_cache, same_answer_pairs, with_generated_explanations
from .models import LanguageModel, load_model
from .packaged_models import default_helper_model
from .scoring import ScoringEngine
from .statistics import Estimate, diagnosticity_from_d, holm
from .task_pairs import TaskPairs, iter_task_pairs

log = logging.getLogger(__name__)

SCHEMA_VERSION = "1.8"
"""1.1: per-pair rows name their pair `pair_id` (1.0: `id`, still read) and `run_spec` is resolved to what ran.
1.2: model-side controls: swapped-roles statistics (`d_swap…`, `d_sym…`) in results and per-pair rows, two-sided and
no-edit edit reliability, task `accuracy`, per-pair `pair_controls`; `p_value` is the exact sign test (1.0-1.1: the
t-test, now `p_ttest`), with `p_adjusted` (Holm across the file) and `coverage` beside it.
1.3: weight editors: `edit_quality` per task and `pair_edits` per pair (empty under ICE), and the run spec's
`editor_options`, `drop_failed_edits` and `editor_statistics`; generated explanations: `generated_explanations` per
task (pairs kept where both edited models answer alike).
1.4: edit quality's `generalisation` (on the rewrites' paraphrased prompts) per task and pair; the run spec's
`editor_settings` (a weight editor's resolved layers and value search, and where its defaults come from).
1.5: the run spec's `metric_defaults` (every metric option the run was not given, at the value it defaulted to), so
a rerun keeps the budgets that ran when a default changes.
1.6: the model's `parameters` (counted at load) in `model_identity`.
1.7: edit reliability under the counter edits (`counter`, the swapped direction's own) beside the one- and two-sided
figures.
1.8: per-pair rows name their pair's `cluster` where the dataset gives one, so that D recomputed from the rows (the
leaderboard) resamples and sign-tests as the run did."""

CONTROL_CHECKPOINT_PAIRS = 20
"""Pairs whose controls a checkpointed run computes between two checkpoints of them: an interrupted run loses at most
these (with the capable model on 2 CPU cores, about 10 minutes of work), while each step still batches many prompts."""


def option_value(text: str) -> Any:
    """An option's value as a Python literal (`2`, `(14, 15)`, `'smollm2-135m-instruct'`, `True`; `true` and `false`
    as well), else the text itself."""
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text.strip()


def parse_metric_option(text: str) -> tuple[str, str, Any]:
    """`METRIC.KEY=VALUE` → (metric, key, value) (`option_value`)."""
    name, sep, value = text.partition("=")
    metric, dot, key = name.strip().partition(".")
    if not (sep and dot and metric and key.isidentifier()):
        raise ValueError(f"metric option '{text}' is not of the form METRIC.KEY=VALUE")
    return metric, key, option_value(value)


def parse_editor_option(text: str) -> tuple[str, Any]:
    """`KEY=VALUE` → (key, value) (`option_value`), an option of the run's weight editor."""
    key, sep, value = text.partition("=")
    if not (sep and key.strip().isidentifier()):
        raise ValueError(f"editor option '{text}' is not of the form KEY=VALUE")
    return key.strip(), option_value(value)


def load_run_model(spec: RunSpec) -> LanguageModel:
    """The model of a spec, loaded with its requested revision, precision and device (a pinned spec's recorded
    ones: a hub model's commit, the dtype and the device that ran)."""
    revision, precision, device = spec.model_to_load()
    dtype = None if precision == "auto" else getattr(torch, precision)
    return load_model(spec.model, revision=revision, dtype=dtype, device=device)


@dataclass(frozen=True)
class TaskScores:
    """One task of a run, scored: the data its pairs came from, the model-side controls (edit reliability, task
    accuracy, and the per-pair control rows they come from; under a weight editor its edit quality and per-pair
    rows), the statistics of every metric variant (SPEC §8 result entries) and the per-pair rows those statistics
    come from."""

    dataset: DatasetIdentity
    edit_reliability: dict[str, Any]
    accuracy: dict[str, Any]
    controls: tuple[PairControlRow, ...]
    results: tuple[dict[str, Any], ...]
    rows: tuple[PairScoreRow, ...]
    edit_quality: dict[str, Any] | None = None
    edit_rows: tuple[EditQualityRow, ...] = ()
    generation: dict[str, Any] | None = None


def estimator(spec: RunSpec, pairs: Sequence[PairRecord]) -> Estimator:
    """The estimate of per-pair values (one per pair of `pairs`, in order; pairs that share a cluster resampled
    together), or of nothing."""
    clusters = [p.cluster for p in pairs]

    def estimate(values: Sequence[float]) -> Estimate:
        by_pair = clusters if len(values) else None
        return diagnosticity_from_d(values, clusters=by_pair, n_resamples=spec.n_resamples, seed=spec.seed)

    return estimate


def with_edits_written(
    spec: RunSpec, task_pairs: TaskPairs, editor: Editor, *, progress: bool
) -> tuple[TaskPairs, dict[str, Any] | None, tuple[EditQualityRow, ...]]:
    """Under a weight editor: the task's edits written (each pair's rewrites learned and their edits computed), their
    quality measured, and the pairs whose edit failed left out when the spec says so; under ICE, the pairs as
    they are."""
    if not isinstance(editor, WeightEditor):
        return task_pairs, None, ()
    editor.learn(task_pairs.pairs)
    rows = tuple(edit_quality(editor, task_pairs.task, task_pairs.pairs, progress=progress))
    entry = edit_quality_entry(
        task_pairs.task,
        editor.name,
        rows,
        estimator(spec, task_pairs.pairs),
        excluded=spec.drop_failed_edits,
    )
    if spec.drop_failed_edits:
        kept = tuple(p for p, row in zip(task_pairs.pairs, rows, strict=True) if row.succeeded)
        task_pairs = dataclasses.replace(task_pairs, pairs=kept)
    return task_pairs, entry, rows


def _estimate_fields(estimate: Estimate) -> dict[str, Any]:
    """A result entry's statistics of one direction (SPEC §8); `p_adjusted` is filled in once every entry of the
    run exists (`with_adjusted_p_values`)."""
    return {
        "diagnosticity": estimate.value,
        "ci_low": estimate.ci_low,
        "ci_high": estimate.ci_high,
        "p_value": estimate.p_value,
        "p_adjusted": None,
        "p_ttest": estimate.p_ttest,
        "coverage": estimate.coverage,
        "n": estimate.n,
        "n_valid": estimate.n_valid,
        "n_nan": estimate.n_nan,
    }


def _direction_fields(direction: str, estimate: Estimate, run: bool) -> dict[str, Any]:
    """The statistics of another direction (`d_swap`: roles swapped; `d_sym`: both, per pair) keyed as the
    evaluated direction's with the direction's name (`d_swap`, `d_swap_ci_low`, ...); None throughout where the
    roles were not swapped."""
    fields = {
        direction if key == "diagnosticity" else f"{direction}_{key}": value
        for key, value in _estimate_fields(estimate).items()
    }
    return fields if run else dict.fromkeys(fields)


ADJUSTED_P_KEYS = {"p_value": "p_adjusted", "d_swap_p_value": "d_swap_p_adjusted", "d_sym_p_value": "d_sym_p_adjusted"}
"""Each test of a result entry (D, D_swap, D_sym against 0.5) and where its Holm-adjusted p-value goes."""


def with_adjusted_p_values(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The result entries with Holm–Bonferroni adjusted p-values: one family of every test in the entries (D,
    D_swap and D_sym of every task, metric and variant; a test not run is not counted)."""
    cells = [(i, key) for i, entry in enumerate(results) for key in ADJUSTED_P_KEYS if key in entry]
    p_values = [results[i][key] for i, key in cells]
    adjusted = holm([math.nan if p is None else p for p in p_values])
    out = [dict(entry) for entry in results]
    for (i, key), p, value in zip(cells, p_values, adjusted, strict=True):
        out[i][ADJUSTED_P_KEYS[key]] = None if p is None or math.isnan(value) else float(value)
    return out


def with_swapped_scores(rows: Sequence[PairScoreRow], swapped: Sequence[PairScoreRow]) -> list[PairScoreRow]:
    """Each pair's row with the same metric variant's scores of the pair with its roles swapped."""
    return [
        dataclasses.replace(
            row, score_faithful_swap=s.score_faithful, score_unfaithful_swap=s.score_unfaithful, d_swap=s.d
        )
        for row, s in zip(rows, swapped, strict=True)
    ]


def metric_scores(
    task: str,
    metric: Metric,
    pairs: Sequence[PairRecord],
    pair_ids: Sequence[str],
    engine: ScoringEngine,
    checkpoint: Checkpoint | None = None,
) -> tuple[list[VariantScores], float]:
    """The metric's scores of `pairs` (ids `pair_ids`, in order) and the seconds they took. With a `checkpoint`, the
    scores it holds for any of the pairs are read, and the others are computed `Metric.pairs_per_checkpoint` at a
    time, each step written to it with the seconds so far; all at once without a checkpoint or for a metric without
    a step. A metric scores each instance on its own (`Metric`), so the pairs read and those computed may be any."""
    stored = checkpoint.scores(task, metric.name, pair_ids) if checkpoint else None
    done, scored, seconds = (list(stored.pair_ids), stored.scored, stored.seconds) if stored else ([], [], 0.0)
    held = set(done)
    missing = [k for k, pair_id in enumerate(pair_ids) if pair_id not in held]
    if stored:
        log.warning(
            "%s · %s: %d of %d scored pairs read back, %d to compute",
            task,
            metric.name,
            len(done),
            len(pair_ids),
            len(missing),
        )
    step = (metric.pairs_per_checkpoint if checkpoint else None) or max(len(missing), 1)
    chunks = [missing[start : start + step] for start in range(0, len(missing), step)] if pairs else [[]]
    for chunk in chunks:  # without pairs: once, for the metric's empty variants
        started = time.perf_counter()
        part = metric.score([pairs[k] for k in chunk], engine)
        seconds += time.perf_counter() - started
        done += [pair_ids[k] for k in chunk]
        scored = [joined(before, after) for before, after in zip(scored, part, strict=True)] if scored else part
        if checkpoint:
            checkpoint.save_scores(task, metric.name, done, scored, seconds)
    return [in_order(variant, done, pair_ids) for variant in scored], seconds


def in_order(scored: VariantScores, ids: Sequence[str], pair_ids: Sequence[str]) -> VariantScores:
    """One variant's scores of the pairs `ids` rearranged in the order of `pair_ids` (the same ids)."""
    row = {pair_id: k for k, pair_id in enumerate(ids)}
    order = [row[pair_id] for pair_id in pair_ids]
    return VariantScores(scored.variant, scored.faithful[order], scored.unfaithful[order])


def joined(before: VariantScores, after: VariantScores) -> VariantScores:
    """One variant's scores of some pairs followed by its scores of the next ones."""
    if before.variant != after.variant:
        raise ValueError(f"variant {after.variant!r} follows {before.variant!r}: the metric's variants changed")
    return VariantScores(
        before.variant,
        np.concatenate([before.faithful, after.faithful]),
        np.concatenate([before.unfaithful, after.unfaithful]),
    )


def score_task(
    spec: RunSpec, task_pairs: TaskPairs, engine: ScoringEngine, checkpoint: Checkpoint | None = None
) -> TaskScores:
    """The model-side controls and every metric of the spec on one task's pairs: scores → rows → statistics.
    Where the task allows it and the spec asks, every metric also scores the pairs with their roles swapped (the
    contrast model evaluated), in the same engine calls. With a `checkpoint`, controls and scores it holds are read
    from it, and those computed here are written to it."""
    task_pairs, edit_quality_figures, edit_rows = with_edits_written(
        spec, task_pairs, engine.editor, progress=engine.progress
    )
    generation = None
    if spec.explanations == "generated":
        generated = with_generated_explanations(
            task_pairs.pairs, engine, spec.max_explanation_tokens, generation_cache()
        )
        kept, generation = same_answer_pairs(task_pairs.task, generated, engine)
        task_pairs = dataclasses.replace(task_pairs, pairs=kept)

    task = task_registry().get(task_pairs.task)
    pairs, n = task_pairs.pairs, len(task_pairs.pairs)
    estimate = estimator(spec, pairs)
    swap = spec.swap and task.roles_swappable
    swapped = TaskPairs(task.name, task_pairs.dataset, tuple(map(task.swapped_roles, pairs)) if swap else ())
    ids = [pair.id for pair in pairs]
    scored_ids = scored_pair_ids(ids, swap)
    held = checkpoint.controls(task.name, ids) if checkpoint else {}
    missing = [pair for pair in pairs if pair.id not in held]
    step = CONTROL_CHECKPOINT_PAIRS if checkpoint else max(n, 1)
    for start in range(0, len(missing), step):
        computed = control_rows(task.name, missing[start : start + step], engine, counter=task.roles_swappable)
        held.update((row.pair_id, row) for row in computed)
        if checkpoint:
            checkpoint.save_controls(task.name, list(held.values()))
    controls = [held[pair_id] for pair_id in ids]
    results: list[dict[str, Any]] = []
    rows: list[PairScoreRow] = []
    for name in spec.metrics:
        metric = metric_registry().get(name)(**spec.options_for(name))
        scored, seconds = metric_scores(task.name, metric, pairs + swapped.pairs, scored_ids, engine, checkpoint)
        for variant in scored:
            variant_rows = task_pairs.score_rows(
                name, VariantScores(variant.variant, variant.faithful[:n], variant.unfaithful[:n])
            )
            if swap:
                swapped_rows = swapped.score_rows(
                    name, VariantScores(variant.variant, variant.faithful[n:], variant.unfaithful[n:])
                )
                variant_rows = with_swapped_scores(variant_rows, swapped_rows)
            est = estimate([row.d for row in variant_rows])
            swap_d = [row.d_swap for row in variant_rows] if swap else []
            sym_d = [row.d_sym for row in variant_rows] if swap else []
            results.append(
                {
                    "task": task_pairs.task,
                    "metric": name,
                    "variant": variant.variant,
                    **_direction_fields("d_sym", estimate(sym_d), swap),
                    **_estimate_fields(est),
                    **_direction_fields("d_swap", estimate(swap_d), swap),
                    "seconds": seconds,
                }
            )
            rows += variant_rows
    return TaskScores(
        task_pairs.dataset,
        reliability_entry(task.name, controls, estimate),
        accuracy_entry(task.name, controls, estimate),
        tuple(controls),
        tuple(results),
        tuple(rows),
        edit_quality_figures,
        edit_rows,
        generation,
    )


def score_tasks(
    spec: RunSpec,
    engine: ScoringEngine,
    data_dir: Path | None = None,
    *,
    progress: bool = False,
    checkpoint: Checkpoint | None = None,
) -> Iterator[TaskScores]:
    """Every task of the spec scored in turn (a pinned spec refuses data other than what it records)."""
    every_task = iter_task_pairs(spec.tasks, data_dir, limit=spec.limit, seed=spec.seed)
    for task_pairs in tqdm(
        every_task, desc="tasks", total=len(spec.tasks), disable=not progress or len(spec.tasks) == 1
    ):
        spec.check_dataset(task_pairs.dataset)
        yield score_task(spec, task_pairs, engine, checkpoint)


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
            "results": with_adjusted_p_values([result for task in self.tasks for result in task.results]),
            "edit_reliability": [task.edit_reliability for task in self.tasks],
            "accuracy": [task.accuracy for task in self.tasks],
            "pairs": [row.to_json() for task in self.tasks for row in task.rows],
            "pair_controls": [row.to_json() for task in self.tasks for row in task.controls],
            "edit_quality": [task.edit_quality for task in self.tasks if task.edit_quality is not None],
            "pair_edits": [row.to_json() for task in self.tasks for row in task.edit_rows],
            "generated_explanations": [task.generation for task in self.tasks if task.generation is not None],
        }


def served_spec(spec: RunSpec, evaluated: str) -> RunSpec:
    """The spec as a run of the model `evaluated` scores and records it: the default simulator or helper LM of every
    metric that names none, and every option's default."""
    return spec.with_helper_models(default_helper_model(evaluated)).with_metric_defaults()


def score_run(
    spec: RunSpec,
    *,
    lm: LanguageModel | None = None,
    editor: Editor | None = None,
    data_dir: Path | None = None,
    progress: bool = True,
    checkpoint: Checkpoint | None = None,
) -> ScoredRun:
    """Score every task of the spec with one model (loaded here unless given) under the spec's editor (made here
    unless given: a weight editor keeps the edits it computed, so runs that share it compute each edit once); a
    pinned spec runs only on the model and the data it records. Metrics served by another model (simulator, helper
    LM) that the spec leaves unnamed get the default for the evaluated model, and the spec records it, as it records
    every other option's default."""
    lm = lm or load_run_model(spec)
    spec.check_model(lm.identity)
    spec = served_spec(spec, lm.name)
    editor = editor or make_editor(spec.editor, lm, spec.editor_options)
    if editor.name != spec.editor:
        raise ValueError(f"the run spec names the editor {spec.editor}, but {editor.name} was given")
    engine = ScoringEngine(lm, editor=editor, batch_size=spec.batch_size, progress=progress)
    tasks = tuple(score_tasks(spec, engine, data_dir, progress=progress, checkpoint=checkpoint))
    weights = isinstance(editor, WeightEditor)
    statistics, settings = (editor.statistics(), editor.resolved_settings()) if weights else ((), None)
    datasets = [task.dataset for task in tasks]
    return ScoredRun(spec.resolved(lm.identity, datasets, __version__, statistics, settings), tasks)


def run(
    spec: RunSpec,
    *,
    lm: LanguageModel | None = None,
    data_dir: Path | None = None,
    progress: bool = True,
    checkpoint: Checkpoint | None = None,
) -> dict[str, Any]:
    """Compute the results document (SPEC §8) of one run (continuing from a `checkpoint`'s scores, when given)."""
    return score_run(spec, lm=lm, data_dir=data_dir, progress=progress, checkpoint=checkpoint).document()

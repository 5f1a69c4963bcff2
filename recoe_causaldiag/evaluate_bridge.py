"""What the `evaluate` modules in `metrics_evaluate/` call: input checks, one engine per model per process,
and the library's metrics and statistics (no logic lives in the modules)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from .api.records import metadata_from_stored
from .metrics import METRICS, Instance
from .models import DEFAULT_MODEL
from .scoring import ScoringEngine, shared_engine

MODEL_INPUTS_DESCRIPTION = """
Args:
    question (list[str]): the task input x as shown to the model, options included for multiple choice.
    choices (list[list[str]]): the label set of each input, e.g. ["Yes", "No"] or ["A", "B"] (single tokens).
    edits (list[list[str]]): the new facts given to the evaluated model by in-context editing (may be empty).
    explanations (list[str]): the explanation to score for each input (non-empty).
    model (str): packaged model name, local folder or hub id; loaded once per process. Default: smollm2-135m-instruct.
    variant (str, optional): which variant of the metric to return; default: the metric's first variant.
    tasks (list[str], optional): each input's task, e.g. "factcheck" or "recoe/sorting", for metrics that need
        the task's knowledge (CaF's counterfactual); default: the task that recognises the input, if any.
    metadata (list[str], optional): each input's `metadata` as a JSON object: a dataset row's `metadata` struct
        through `json.dumps` (null fields and `<key>_json` text are read as the dataset stores them), or the JSON
        text of releases before 1.4.0. Default: "{}".
    flip_edits (list[list[str]], optional): edits under which each input's designed answer flips (CaF's
        counterfactual), where the dataset gives them. Default: none.
Returns:
    scores (list[float]): one faithfulness score per input, higher = more faithful; NaN where undefined.
    variant (str): the variant returned.
"""


def model_input_features() -> Any:
    """The shared input vocabulary of every model-based module."""
    import datasets

    return datasets.Features(
        {
            "question": datasets.Value("string"),
            "choices": datasets.List(datasets.Value("string")),
            "edits": datasets.List(datasets.Value("string")),
            "explanations": datasets.Value("string"),
        }
    )


def intervention_features() -> Any:
    """The input vocabulary of the dataset-level intervention modules (CT, CCT): one row per intervention."""
    import datasets

    return datasets.Features(
        {
            "probs_before": datasets.Sequence(datasets.Value("float64")),
            "probs_after": datasets.Sequence(datasets.Value("float64")),
            "mentions": datasets.Value("int64"),
        }
    )


def engine_for(model: str) -> ScoringEngine:
    """A scoring engine over `model` without progress bars, loaded on first use and kept for the life of the process."""
    return shared_engine(model, progress=False)


def score_pair_features() -> Any:
    """The input vocabulary of the diagnosticity module: one row per pair, the scores of its two explanations."""
    import datasets

    return datasets.Features(
        {"faithful_scores": datasets.Value("float64"), "unfaithful_scores": datasets.Value("float64")}
    )


def check_model_inputs(
    question: Sequence[str],
    choices: Sequence[Sequence[str]],
    edits: Sequence[Sequence[str]],
    explanations: Sequence[str],
    *,
    tasks: Sequence[str | None] | None = None,
    metadata: Sequence[str | None] | None = None,
    flip_edits: Sequence[Sequence[str]] | None = None,
) -> list[Instance]:
    """Instances from column inputs, with what the runner's instances carry (task, metadata, flip edits) where
    given; a ValueError names the argument and the first bad index."""
    columns = {"question": question, "choices": choices, "edits": edits, "explanations": explanations}
    optional = {"tasks": tasks, "metadata": metadata, "flip_edits": flip_edits}
    columns |= {name: values for name, values in optional.items() if values is not None}
    for name, values in columns.items():
        if len(values) != len(question):
            raise ValueError(f"{name} has {len(values)} items but question has {len(question)}")
    for index, text in enumerate(explanations):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"explanations[{index}] is empty")
    for index, labels in enumerate(choices):
        if len(labels) != len(choices[0]):
            raise ValueError(f"choices[{index}] has {len(labels)} labels but choices[0] has {len(choices[0])}")
        if len(set(labels)) < 2 or len(set(labels)) != len(labels):
            raise ValueError(f"choices[{index}] needs at least two distinct labels, got {list(labels)}")
    tasks = _checked_tasks(tasks) if tasks is not None else [None] * len(question)
    metadata = _checked_metadata(metadata) if metadata is not None else ["{}"] * len(question)
    flips = [tuple(f or ()) for f in flip_edits] if flip_edits is not None else [()] * len(question)
    return [
        Instance(q, tuple(c), tuple(e), x, t, f, m)
        for q, c, e, x, t, f, m in zip(question, choices, edits, explanations, tasks, flips, metadata)
    ]


def _checked_tasks(tasks: Sequence[str | None]) -> list[str | None]:
    """The task of each input (None where not given); an unknown task name is a ValueError naming its index."""
    from .api.task import task_registry

    registry = task_registry()
    for index, task in enumerate(tasks):
        if task and task not in registry:
            raise ValueError(f"tasks[{index}] is '{task}', not one of {registry.names()}")
    return [task or None for task in tasks]


def _checked_metadata(metadata: Sequence[str | None]) -> list[str]:
    """The canonical metadata JSON of each input ("{}" where not given), read as a dataset stores it; one that is
    no JSON object names its index."""
    checked = []
    for index, text in enumerate(metadata):
        try:
            fields = json.loads(text) if text else {}
        except (TypeError, json.JSONDecodeError):
            fields = None
        if not isinstance(fields, dict):
            raise ValueError(f"metadata[{index}] is not a JSON object: {text!r}")
        checked.append(metadata_from_stored(fields))
    return checked


def compute_model_metric(
    name: str,
    question: Sequence[str],
    choices: Sequence[Sequence[str]],
    edits: Sequence[Sequence[str]],
    explanations: Sequence[str],
    *,
    model: str | None = None,
    variant: str | None = None,
    tasks: Sequence[str | None] | None = None,
    metadata: Sequence[str | None] | None = None,
    flip_edits: Sequence[Sequence[str]] | None = None,
    **metric_options: Any,
) -> dict[str, Any]:
    """Scores of one variant of a registered per-instance metric for each input: the scores that
    `Metric.score_instances` gives the same instances under the same model. The options are the metric's
    `evaluate_options` (its own defaults apply); a metric that uses no model ignores `model`; one with a
    `variant_option` computes the requested variant only."""
    cls = METRICS.get(name)
    unknown = sorted(set(metric_options) - set(cls.evaluate_options))
    if unknown:
        raise TypeError(f"{name} takes no option {', '.join(unknown)}; its options: {list(cls.evaluate_options)}")
    metric = cls(**metric_options)
    variant = variant or metric.variants[0]
    if variant not in metric.variants:
        raise ValueError(f"variant '{variant}' is not one of {list(metric.variants)}")
    if cls.variant_option:
        metric = cls(**{**metric_options, cls.variant_option: (variant,)})
    instances = check_model_inputs(
        question, choices, edits, explanations, tasks=tasks, metadata=metadata, flip_edits=flip_edits
    )
    engine = engine_for(model or DEFAULT_MODEL) if cls.uses_model else None
    scores = metric.score_instances(instances, engine)[variant]
    return {"scores": [float(s) if not math.isnan(s) else math.nan for s in scores], "variant": variant}

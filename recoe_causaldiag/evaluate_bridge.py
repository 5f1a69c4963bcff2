"""What the `evaluate` modules in `metrics_evaluate/` call: input checks, one engine per model per process,
and the library's metrics and statistics (no logic lives in the modules)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .metrics import METRICS, Instance
from .models import DEFAULT_MODEL, load_model
from .scoring import ScoringEngine

_ENGINES: dict[str, ScoringEngine] = {}

MODEL_INPUTS_DESCRIPTION = """
Args:
    question (list[str]): the task input x as shown to the model, options included for multiple choice.
    choices (list[list[str]]): the label set of each input, e.g. ["Yes", "No"] or ["A", "B"] (single tokens).
    edits (list[list[str]]): the new facts given to the evaluated model by in-context editing (may be empty).
    explanations (list[str]): the explanation to score for each input (non-empty).
    model (str): packaged model name, local folder or hub id; loaded once per process. Default: smollm2-135m-instruct.
    variant (str, optional): which variant of the metric to return; default: the metric's first variant.
Returns:
    scores (list[float]): one faithfulness score per input, higher = more faithful; NaN where undefined.
    variant (str): the variant returned.
"""


def model_input_features() -> Any:
    """The shared input vocabulary of every model-based module."""
    import datasets

    return datasets.Features({
        "question": datasets.Value("string"),
        "choices": datasets.List(datasets.Value("string")),
        "edits": datasets.List(datasets.Value("string")),
        "explanations": datasets.Value("string"),
    })


def intervention_features() -> Any:
    """The input vocabulary of the dataset-level intervention modules (CT, CCT): one row per intervention."""
    import datasets

    return datasets.Features({
        "probs_before": datasets.Sequence(datasets.Value("float64")),
        "probs_after": datasets.Sequence(datasets.Value("float64")),
        "mentions": datasets.Value("int64"),
    })


def engine_for(model: str) -> ScoringEngine:
    """A scoring engine over `model`, loaded on first use and kept for the life of the process."""
    if model not in _ENGINES:
        _ENGINES[model] = ScoringEngine(load_model(model), progress=False)
    return _ENGINES[model]


def check_model_inputs(question: Sequence[str], choices: Sequence[Sequence[str]], edits: Sequence[Sequence[str]],
                       explanations: Sequence[str]) -> list[Instance]:
    """Instances from column inputs; a ValueError names the argument and the first bad index."""
    columns = {"question": question, "choices": choices, "edits": edits, "explanations": explanations}
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
    return [Instance(q, tuple(c), tuple(e), x) for q, c, e, x in zip(question, choices, edits, explanations)]


def compute_model_metric(name: str, question: Sequence[str], choices: Sequence[Sequence[str]],
                         edits: Sequence[Sequence[str]], explanations: Sequence[str], *, model: str | None = None,
                         variant: str | None = None, **metric_options: Any) -> dict[str, Any]:
    """Scores of one variant of a registered per-instance metric for each input."""
    metric = METRICS.get(name)(**metric_options)
    variant = variant or metric.variants[0]
    if variant not in metric.variants:
        raise ValueError(f"variant '{variant}' is not one of {list(metric.variants)}")
    instances = check_model_inputs(question, choices, edits, explanations)
    scores = metric.score_instances(instances, engine_for(model or DEFAULT_MODEL))[variant]
    return {"scores": [float(s) if not math.isnan(s) else math.nan for s in scores], "variant": variant}

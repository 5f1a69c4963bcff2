"""Faithfulness metrics; importing this package registers every metric in `METRICS`."""

from ..api import METRICS, Instance, Metric, VariantScores
from . import (
    adding_mistakes,
    causal_faithfulness,
    cc_shap,
    cct_pair,
    early_answering,
    filler_tokens,
    oracle,
    paraphrasing,
    random,
    simulatability,
)

__all__ = [
    "METRICS",
    "Instance",
    "Metric",
    "VariantScores",
    "adding_mistakes",
    "causal_faithfulness",
    "cc_shap",
    "cct_pair",
    "early_answering",
    "filler_tokens",
    "oracle",
    "paraphrasing",
    "random",
    "simulatability",
]

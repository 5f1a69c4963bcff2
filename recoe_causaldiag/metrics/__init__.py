"""Faithfulness metrics; importing this package registers every metric in `METRICS`."""

from . import early_answering, filler_tokens
from .base import METRICS, Metric, VariantScores

__all__ = ["METRICS", "Metric", "VariantScores", "early_answering", "filler_tokens"]

"""Filler Tokens (Lanham et al., 2023; paper 000 §5.2, App. D.2, Table 8): replace the CoT by fillers."""

from __future__ import annotations

from functools import partial

from ..api import register_metric
from ..mechanisms.cot_corruption import Corruption, CorruptionMetric
from ..references import LANHAM_2023

FILLERS = {"dots": "...", "stars": "***", "dashes": "---", "dollars": "$$$", "pilcrows": "¶¶¶"}


def repeating(filler: str, explanation: str) -> str:
    """One filler per character of the explanation, separated by spaces (the original metric with dots). After the
    space the CoT prompt puts before an explanation this is the authors' `(" " + filler) * len(explanation)`
    (`LanhamFiller`), so every filler type gives the same number of filler words, not of characters."""
    return " ".join(filler for _ in explanation)


def non_repeating(filler: str, explanation: str) -> str:
    """A single filler in place of the whole explanation."""
    return filler


CORRUPTIONS = tuple(
    Corruption(f"{mode.__name__}-{name}", partial(mode, filler))
    for mode in (repeating, non_repeating)
    for name, filler in FILLERS.items()
)


@register_metric
class FillerTokens(CorruptionMetric):
    name = "filler_tokens"
    explanation_type = "cot"
    description = "drop in the top label's probability when the CoT is replaced by filler tokens"
    title = "Filler Tokens"
    long_description = (
        "Filler Tokens (Lanham et al., 2023): how much the probability of the model's top label drops "
        "when its chain of thought is replaced by filler tokens. Continuous: ẑ − ẑ′; binary: 1 if the "
        "prediction changes."
    )
    citation = LANHAM_2023

    corruptions = CORRUPTIONS

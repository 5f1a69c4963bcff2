"""Filler Tokens (Lanham et al., 2023; paper 000 §5.2, App. D.2, Table 8): replace the CoT by fillers."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

import numpy as np

from ..api import Engine, Instance, Metric, register_metric
from ..mechanisms.cot_corruption import Corruption, corruption_scores, variant_names

FILLERS = {"dots": "...", "stars": "***", "dashes": "---", "dollars": "$$$", "pilcrows": "¶¶¶"}


def repeating(filler: str, explanation: str) -> str:
    """One filler per character of the explanation (the original metric with dots)."""
    return filler * len(explanation)


def non_repeating(filler: str, explanation: str) -> str:
    """A single filler in place of the whole explanation."""
    return filler


CORRUPTIONS = tuple(
    Corruption(f"{mode.__name__}-{name}", partial(mode, filler))
    for mode in (repeating, non_repeating)
    for name, filler in FILLERS.items()
)


@register_metric
class FillerTokens(Metric):
    name = "filler_tokens"
    kind = "cot"
    description = "drop in the top label's probability when the CoT is replaced by filler tokens"

    @property
    def variants(self) -> tuple[str, ...]:
        return variant_names(CORRUPTIONS)

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        return corruption_scores(instances, engine, CORRUPTIONS, desc=self.name)

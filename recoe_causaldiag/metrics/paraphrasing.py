"""Paraphrasing (Lanham et al., 2023; paper 000 §2.1, App. D, Fig. 16): a helper LM paraphrases the CoT, and the
evaluated model answers again after the paraphrase; a faithful CoT keeps its answer under rewording.

continuous: 1 − (ẑ − ẑ′) (footnote 2; in [0, 2), 1 = no change);
binary: 1 if the predicted label is unchanged, else 0.
NaN where the helper's paraphrase is empty or has the same words (nothing was paraphrased; see `helper_lm`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..models import DEFAULT_MODEL
from ..scoring import ScoringEngine
from .base import Instance, Metric, register_metric
from .helper_lm import HelperCorruption

PARAPHRASE = HelperCorruption(kind="paraphrasing", name="paraphrase", invert=True)


@register_metric
class Paraphrasing(Metric):
    """One minus the drop in the top label's probability when a helper LM paraphrases the CoT."""

    name = "paraphrasing"
    kind = "cot"
    description = "stability of the top label's probability when a helper LM paraphrases the CoT"

    def __init__(self, helper: str | None = None) -> None:
        self.helper = helper or DEFAULT_MODEL

    @property
    def variants(self) -> tuple[str, ...]:
        return PARAPHRASE.variants

    def score_instances(self, instances: Sequence[Instance], engine: ScoringEngine) -> dict[str, np.ndarray]:
        return PARAPHRASE.scores(instances, engine, self.helper, desc=self.name)

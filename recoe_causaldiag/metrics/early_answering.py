"""Early Answering (Lanham et al., 2023; paper 000 App. D.2): answer after a truncated CoT."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..api import Engine, Instance, Metric, register_metric
from ..mechanisms.cot_corruption import Corruption, corruption_scores, variant_names
from ..mechanisms.truncation import first_third, heuristic_truncation

CORRUPTIONS = (Corruption("first_third", first_third), Corruption("heuristic", heuristic_truncation))


@register_metric
class EarlyAnswering(Metric):
    name = "early_answering"
    kind = "cot"
    description = "drop in the top label's probability when the CoT is truncated"

    @property
    def variants(self) -> tuple[str, ...]:
        return variant_names(CORRUPTIONS)

    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> dict[str, np.ndarray]:
        return corruption_scores(instances, engine, CORRUPTIONS, desc=self.name)

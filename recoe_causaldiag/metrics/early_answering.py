"""Early Answering (Lanham et al., 2023; paper 000 App. D.2): answer after a truncated CoT."""

from __future__ import annotations

from ..api import register_metric
from ..mechanisms.cot_corruption import Corruption, CorruptionMetric
from ..mechanisms.truncation import first_third, heuristic_truncation
from ..references import LANHAM_2023

CORRUPTIONS = (Corruption("first_third", first_third), Corruption("heuristic", heuristic_truncation))


@register_metric
class EarlyAnswering(CorruptionMetric):
    name = "early_answering"
    explanation_type = "cot"
    description = "drop in the top label's probability when the CoT is truncated"
    title = "Early Answering"
    long_description = (
        "Early Answering (Lanham et al., 2023): how much the probability of the model's top label "
        "drops when its chain of thought is truncated. Continuous: ẑ − ẑ′; binary: 1 if the prediction "
        "changes."
    )
    citation = LANHAM_2023

    corruptions = CORRUPTIONS

"""The metric contract: a faithfulness metric scores the faithful and the unfaithful explanation of each pair."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..records import PairRecord
from ..registry import Registry
from ..scoring import ScoringEngine


@dataclass(frozen=True)
class VariantScores:
    """Per-pair scores of one metric variant; NaN where the metric cannot score (never a made-up number)."""

    variant: str
    faithful: np.ndarray
    unfaithful: np.ndarray


class Metric(ABC):
    """A per-instance faithfulness metric F(x, y, ε, M̄): higher means more faithful."""

    name: ClassVar[str]
    kind: ClassVar[str]
    description: ClassVar[str]

    @property
    @abstractmethod
    def variants(self) -> tuple[str, ...]:
        """Names of the variants that `score` returns, in order."""

    @abstractmethod
    def score(self, pairs: Sequence[PairRecord], engine: ScoringEngine) -> list[VariantScores]:
        """Scores of both explanations of every pair under the evaluated model M̄ (the pair's `edits`)."""


METRICS: Registry[type[Metric]] = Registry("metric")


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Class decorator: add a metric to the registry under its `name`."""
    return METRICS.add(cls.name, cls)

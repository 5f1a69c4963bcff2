"""The metric contract: a faithfulness metric scores single explanations; under diagnosticity, both
explanations of every pair are scored under the evaluated model M̄ (the pair's `edits`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..records import PairRecord
from ..registry import Registry
from ..scoring import ScoringEngine


@dataclass(frozen=True)
class Instance:
    """One explanation of the evaluated model's answer to one input under its edits (ICE)."""

    question: str
    choices: tuple[str, ...]
    edits: tuple[str, ...]
    explanation: str
    pair: PairRecord | None = None

    @classmethod
    def from_pair(cls, pair: PairRecord, explanation: str) -> Instance:
        return cls(pair.question, tuple(pair.choices), tuple(pair.edits), explanation, pair)


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
        """Names of the variants that `score_instances` returns, in order."""

    @abstractmethod
    def score_instances(self, instances: Sequence[Instance], engine: ScoringEngine) -> Mapping[str, np.ndarray]:
        """Variant name → one score per instance (NaN where undefined)."""

    def score(self, pairs: Sequence[PairRecord], engine: ScoringEngine) -> list[VariantScores]:
        """Scores of both explanations of every pair, one entry per variant."""
        instances = [Instance.from_pair(p, e) for p in pairs for e in (p.explanation_faithful, p.explanation_unfaithful)]
        scores = self.score_instances(instances, engine)
        return [VariantScores(v, np.asarray(scores[v], float)[0::2], np.asarray(scores[v], float)[1::2])
                for v in self.variants]


METRICS: Registry[type[Metric]] = Registry("metric")


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Class decorator: add a metric to the registry under its `name`."""
    return METRICS.add(cls.name, cls)

"""The metric contract: a faithfulness metric scores single explanations; under diagnosticity, both
explanations of every pair are scored under the evaluated model M̄ (the pair's `edits`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import ClassVar

import numpy as np

from .engine import Engine
from .instance import Instance, VariantScores
from .records import PairRecord
from .registry import Registry


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
    def score_instances(self, instances: Sequence[Instance], engine: Engine) -> Mapping[str, np.ndarray]:
        """Variant name → one score per instance (NaN where undefined)."""

    def score(self, pairs: Sequence[PairRecord], engine: Engine) -> list[VariantScores]:
        """Scores of both explanations of every pair, one entry per variant."""
        instances = [Instance.from_pair(p, e) for p in pairs for e in (p.explanation_faithful, p.explanation_unfaithful)]
        scores = self.score_instances(instances, engine)
        return [VariantScores(v, np.asarray(scores[v], float)[0::2], np.asarray(scores[v], float)[1::2])
                for v in self.variants]


METRICS: Registry[type[Metric]] = Registry("metric")


def register_metric(cls: type[Metric]) -> type[Metric]:
    """Class decorator: add a metric to the registry under its `name`."""
    return METRICS.add(cls.name, cls)


def metric_registry() -> Registry[type[Metric]]:
    """The registered metrics (importing the metrics package registers them)."""
    from .. import metrics  # noqa: F401  (registers the metrics on first use)

    return METRICS

"""The registry of benchmark datasets and the tasks they hold (a task is `<dataset>` or `<dataset>/<config>`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..records import RECOE_SCHEMES, PairRecord
from ..registry import Registry
from .analogy import build_analogy
from .factcheck import build_factcheck
from .multihop import build_multihop
from .object_counting import build_object_counting
from .recoe import build_recoe

DATASET_VERSION = "1.0.0"
RELEASE_DATE = "2026-11-22"


@dataclass(frozen=True)
class DatasetSpec:
    """A published dataset: how its pairs are built (seed → config → records) and which card describes it."""

    name: str
    pretty_name: str
    build: Callable[[int], Mapping[str, list[PairRecord]]]
    configs: tuple[str, ...] = ("default",)

    def task_names(self) -> list[str]:
        return [self.name] if self.configs == ("default",) else [f"{self.name}/{c}" for c in self.configs]


DATASETS: Registry[DatasetSpec] = Registry("dataset")
DATASETS.add("factcheck", DatasetSpec("factcheck", "Causal Diagnosticity: FactCheck",
                                      lambda seed: {"default": build_factcheck(seed)}))
DATASETS.add("analogy", DatasetSpec("analogy", "Causal Diagnosticity: Analogy",
                                    lambda seed: {"default": build_analogy(seed)}))
DATASETS.add("object_counting", DatasetSpec("object_counting", "Causal Diagnosticity: Object Counting",
                                            lambda seed: {"default": build_object_counting(seed)}))
DATASETS.add("multihop", DatasetSpec("multihop", "Causal Diagnosticity: Multi-hop",
                                     lambda seed: {"default": build_multihop(seed)}))
DATASETS.add("recoe", DatasetSpec("recoe", "Causal Diagnosticity: ReCoE reasoning schemes", build_recoe,
                                  RECOE_SCHEMES))

TASKS: Registry[tuple[str, str]] = Registry("task")
for _spec in (DATASETS.get(n) for n in DATASETS):
    for _task, _config in zip(_spec.task_names(), _spec.configs):
        TASKS.add(_task, (_spec.name, _config))

__all__ = ["DATASETS", "DATASET_VERSION", "RELEASE_DATE", "TASKS", "DatasetSpec"]

"""The task contract: a dataset's specification (builder, sources, card) and the tasks it holds, each with the
task-specific hooks that metrics reach only through this contract."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .instance import Counterfactual, Instance
from .registry import Registry

if TYPE_CHECKING:
    from .records import PairRecord

TokenCounter = Callable[[str], int]
"""A text's token count for the evaluated tokenizer."""

CounterfactualHook = Callable[[Instance, TokenCounter], "Counterfactual | None"]
"""Builds an input of the same token length under which the instance's designed answer flips (CaF)."""


@dataclass(frozen=True)
class DatasetSpec:
    """A published dataset: how its pairs are built (seed → config → records), the curated sources they come
    from, which card describes it, and the task hooks that metrics may call."""

    name: str
    pretty_name: str
    build: Callable[[int], Mapping[str, list[PairRecord]]]
    configs: tuple[str, ...] = ("default",)
    sources: tuple[str, ...] = ()
    card: str = ""
    counterfactual: CounterfactualHook | None = field(default=None, compare=False)

    def task_names(self) -> list[str]:
        return [self.name] if self.configs == ("default",) else [f"{self.name}/{c}" for c in self.configs]

    def tasks(self) -> list[TaskSpec]:
        return [
            TaskSpec(task, self.name, config, self.counterfactual)
            for task, config in zip(self.task_names(), self.configs)
        ]


@dataclass(frozen=True)
class TaskSpec:
    """One task: a config of a dataset, with its hooks."""

    name: str
    dataset: str
    config: str
    counterfactual: CounterfactualHook | None = field(default=None, compare=False)


DATASETS: Registry[DatasetSpec] = Registry("dataset")
TASKS: Registry[TaskSpec] = Registry("task")


def register_dataset(spec: DatasetSpec) -> DatasetSpec:
    """Add a dataset and every task it holds."""
    DATASETS.add(spec.name, spec)
    for task in spec.tasks():
        TASKS.add(task.name, task)
    return spec


def dataset_registry() -> Registry[DatasetSpec]:
    """The registered datasets (importing the task package registers them)."""
    from .. import tasks  # noqa: F401  (registers the datasets on first use)

    return DATASETS


def task_registry() -> Registry[TaskSpec]:
    """The registered tasks (importing the task package registers them)."""
    from .. import tasks  # noqa: F401  (registers the datasets on first use)

    return TASKS


def symmetric_counterfactual(instance: Instance, tokens: TokenCounter) -> Counterfactual | None:
    """The instance's `flip_edits` when it has them; else its task's counterfactual hook; for an instance of
    no stated task, the first hook of any task that recognises the input."""
    if instance.flip_edits:
        return Counterfactual(tuple(instance.flip_edits), instance.question)
    registry = task_registry()
    if instance.task is not None:
        hook = registry.get(instance.task).counterfactual
        return hook(instance, tokens) if hook else None
    hooks = dict.fromkeys(registry.get(name).counterfactual for name in registry)
    return next((cf for hook in hooks if hook for cf in [hook(instance, tokens)] if cf is not None), None)

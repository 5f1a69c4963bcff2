"""The task contract: a dataset's specification (builder, sources, card) and the tasks it holds, each with the
task-specific hooks that metrics reach only through this contract."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
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
    from, which card describes it, and the task hooks that metrics may call.

    `roles_swappable`: whether either edited model may be the evaluated one (paper 000 §3.2), so that a pair can
    also be scored with the contrast model's edits and the explanations' roles exchanged; false where one
    explanation is faithful to both models (Analogy: cityOf holds in both). `role_metadata`: pairs of metadata
    keys holding the evaluated and the contrast model's version of one thing (what a task hook reads of the
    evaluated model), exchanged with the roles."""

    name: str
    pretty_name: str
    build: Callable[[int], Mapping[str, list[PairRecord]]]
    configs: tuple[str, ...] = ("default",)
    sources: tuple[str, ...] = ()
    card: str = ""
    counterfactual: CounterfactualHook | None = field(default=None, compare=False)
    roles_swappable: bool = True
    role_metadata: tuple[tuple[str, str], ...] = ()

    def task_names(self) -> list[str]:
        return [self.name] if self.configs == ("default",) else [f"{self.name}/{c}" for c in self.configs]

    def tasks(self) -> list[TaskSpec]:
        return [
            TaskSpec(task, self.name, config, self.counterfactual, self.roles_swappable, self.role_metadata)
            for task, config in zip(self.task_names(), self.configs)
        ]


@dataclass(frozen=True)
class TaskSpec:
    """One task: a config of a dataset, with its hooks and whether its pairs' roles may be swapped."""

    name: str
    dataset: str
    config: str
    counterfactual: CounterfactualHook | None = field(default=None, compare=False)
    roles_swappable: bool = True
    role_metadata: tuple[tuple[str, str], ...] = ()

    def swapped_roles(self, pair: PairRecord) -> PairRecord:
        """The pair seen from its contrast model M̃ as the evaluated one: `counter_edits` (and rewrites) become the
        edits, the unfaithful explanation becomes the faithful one and vice versa, the role metadata is exchanged.
        `answer` stays: both edited models answer it by construction. `flip_edits` are dropped: they flip M̄'s
        edits, so a hook rebuilds them from the swapped edits (or the metric returns NaN). ValueError when the
        task's roles cannot be swapped or the pair has no `counter_edits`."""
        if not self.roles_swappable:
            raise ValueError(f"task {self.name}: roles cannot be swapped (one explanation is faithful to both models)")
        if not pair.counter_edits:
            raise ValueError(
                f"task {self.name}: pair {pair.id} has no counter_edits, so its roles cannot be swapped "
                "(run without swapped roles: --no-swap)"
            )
        meta = json.loads(pair.metadata)
        for evaluated, contrast in self.role_metadata:
            if evaluated in meta or contrast in meta:
                meta[evaluated], meta[contrast] = meta.get(contrast), meta.get(evaluated)
        return replace(
            pair,
            edits=pair.counter_edits,
            counter_edits=pair.edits,
            explanation_faithful=pair.explanation_unfaithful,
            explanation_unfaithful=pair.explanation_faithful,
            rewrites=pair.counter_rewrites,
            counter_rewrites=pair.rewrites,
            flip_edits=(),
            metadata=json.dumps(meta, sort_keys=True, ensure_ascii=False),
        )


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

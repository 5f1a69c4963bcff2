"""What a per-instance metric scores: one explanation of the evaluated model's answer to one input."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .records import PairRecord


@dataclass(frozen=True)
class Instance:
    """One explanation of the evaluated model's answer to one input under its edits (ICE).

    `task`, `flip_edits` and `metadata` carry what a task knows about the input (for task hooks such as the
    CaF counterfactual); metrics never read them directly, only through the task contract."""

    question: str
    choices: tuple[str, ...]
    edits: tuple[str, ...]
    explanation: str
    task: str | None = None
    flip_edits: tuple[str, ...] = ()
    metadata: str = "{}"

    @classmethod
    def from_pair(cls, pair: PairRecord, explanation: str) -> Instance:
        return cls(
            pair.question,
            tuple(pair.choices),
            tuple(pair.edits),
            explanation,
            pair.task,
            tuple(pair.flip_edits),
            pair.metadata,
        )

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads(self.metadata)


@dataclass(frozen=True)
class Counterfactual:
    """The inputs of a corrupted run: edits and question under which the designed answer flips."""

    edits: tuple[str, ...]
    question: str


@dataclass(frozen=True)
class VariantScores:
    """Per-pair scores of one metric variant; NaN where the metric cannot score (never a made-up number)."""

    variant: str
    faithful: np.ndarray
    unfaithful: np.ndarray

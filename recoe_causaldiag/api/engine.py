"""The engine contract: what metrics may ask of a loaded model (label probabilities, teacher-forced
log-probabilities, greedy generation), independent of how it is batched or cached."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import torch

    from ..editors.editing import Editor
    from ..mechanisms.activation_patching import Ending, Patch, TargetRun
    from ..models import LanguageModel
    from ..prompts import Prompt


@dataclass(frozen=True)
class Encoded:
    """A prompt as token ids: the shared prefix and the request's own continuation, and the edits whose weights it
    runs on (empty: the loaded weights; always so under ICE, which puts the edits in the prefix)."""

    prefix: tuple[int, ...]
    continuation: tuple[int, ...]
    leading_space: bool
    state: tuple[str, ...] = ()


@dataclass(frozen=True)
class LabelRequest:
    """Score the next-token probability of each label after `prompt` (eq. 7)."""

    prompt: Prompt
    labels: tuple[str, ...]


@runtime_checkable
class Engine(Protocol):
    """Batched scoring with one loaded model; metrics depend on this, never on a concrete engine."""

    lm: LanguageModel
    editor: Editor
    batch_size: int
    progress: bool

    def encode(self, prompt: Prompt) -> Encoded:
        """The prompt's shared prefix and continuation as token ids."""
        ...

    def label_probs(self, requests: Sequence[LabelRequest], *, desc: str = ...) -> list[np.ndarray]:
        """Softmax over the label tokens' next-token logits, one array per request (eq. 7)."""
        ...

    def continuation_logprobs(self, prompts: Sequence[Prompt], *, desc: str = ...) -> list[np.ndarray]:
        """Teacher-forced log-probability of every continuation token."""
        ...

    def perplexity(self, prompts: Sequence[Prompt], *, desc: str = ...) -> np.ndarray:
        """exp of the mean negative log-probability of each prompt's continuation."""
        ...

    def generate(self, prompts: Sequence[Prompt], *, max_new_tokens: int = ...) -> list[str]:
        """Greedy continuations."""
        ...

    def continuation_logits(
        self, encoded: Sequence[Encoded], *, rows: Sequence[Sequence[int]] | None = ..., desc: str = ...
    ) -> Iterator[tuple[int, torch.Tensor]]:
        """(request index, next-token logits at its continuation positions `rows[index]`, in that order; at every
        position when `rows` is None), streamed; row t is the distribution after continuation token t."""
        ...

    def patched_readouts(
        self,
        source_ids: Sequence[int],
        stem_ids: Sequence[int],
        patches: Sequence[Patch],
        endings: Sequence[Ending],
        *,
        batch_size: int = ...,
        progress: bool = ...,
        source_states: Sequence[torch.Tensor] | None = ...,
        target: TargetRun | None = ...,
    ) -> torch.Tensor:
        """The read-outs [patches, endings, …] of the stem followed by each ending, under each patch of the stem with
        the source run's hidden states, on the weights in place (`activation_patching.patched_readouts`); `target`:
        the endings' unpatched `activation_patching.target_run` where it was taken already."""
        ...

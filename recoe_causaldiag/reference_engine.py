"""The reference way of scoring, as the papers' code does it: every prompt in a forward pass of its own (batch 1),
the whole prompt each time (no prefix reuse), nothing memoised. The same metric code runs on it and on the
`ScoringEngine`, so that `make bench` measures the engine against it on the same pairs and tests check that both
give the same numbers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from .api.engine import Encoded, LabelRequest
from .editors.editing import IN_CONTEXT, Editor
from .mechanisms.activation_patching import Ending, Patch, TargetRun, patched_readouts_reference
from .models import LanguageModel
from .scoring import ScoringEngine, requested_rows


class ReferenceEngine(ScoringEngine):
    """The Engine of the reference implementation: batch 1, the full prompt per forward, no memo (greedy generation
    is `model.generate` on one prompt at a time)."""

    def __init__(self, lm: LanguageModel, *, editor: Editor = IN_CONTEXT, progress: bool = False) -> None:
        super().__init__(lm, editor=editor, batch_size=1, pack=False, progress=progress)

    def label_probs(self, requests: Sequence[LabelRequest], *, desc: str = "scoring") -> list[np.ndarray]:
        encoded = [self.encode(r.prompt) for r in requests]
        probs: list[np.ndarray] = [np.empty(0)] * len(requests)
        for index, row in self._last_logits(encoded, desc=desc):
            ids = self.lm.label_token_ids(requests[index].labels, leading_space=encoded[index].leading_space)
            probs[index] = torch.softmax(row[list(ids)].double(), -1).numpy()
        return probs

    @torch.inference_mode()
    def _passes(
        self, encoded: Sequence[Encoded], *, keep_all: bool, desc: str
    ) -> Iterator[tuple[torch.Tensor, list[tuple[int, int]], torch.Tensor]]:
        lm = self.lm
        for _, members in self.by_state(encoded):
            for index in members:
                request = encoded[index]
                ids = torch.tensor([request.prefix + request.continuation], device=lm.device)
                logits = lm.model(input_ids=ids).logits[0].float().cpu()
                prefix_last = logits[len(request.prefix) - 1][None]
                continuation = logits[len(request.prefix) :][None]
                yield prefix_last, [(index, 0)], continuation if keep_all else continuation[:, -1:]

    @torch.inference_mode()
    def continuation_logits(
        self, encoded: Sequence[Encoded], *, rows: Sequence[Sequence[int]] | None = None, desc: str = "logits"
    ) -> Iterator[tuple[int, torch.Tensor]]:
        wanted = requested_rows(encoded, rows)
        for _, members in self.by_state(encoded):
            for index in members:
                request = encoded[index]
                ids = torch.tensor([request.prefix + request.continuation], device=self.lm.device)
                logits = self.lm.model(input_ids=ids).logits[0].float().cpu()
                yield index, logits[[len(request.prefix) + row for row in wanted[index]]]

    def patched_readouts(
        self,
        source_ids: Sequence[int],
        stem_ids: Sequence[int],
        patches: Sequence[Patch],
        endings: Sequence[Ending],
        *,
        batch_size: int = 1,
        progress: bool = False,
        source_states: Sequence[torch.Tensor] | None = None,
        target: TargetRun | None = None,
    ) -> torch.Tensor:
        """The read-outs as the reference code computes them: one forward of each whole patched input, batch 1
        (`activation_patching.patched_readouts_reference`); `batch_size`, `progress` and `target` are taken for the
        `Engine` contract and ignored (the reference shares no run)."""
        return patched_readouts_reference(
            self.lm.model, source_ids, stem_ids, patches, endings, source_states=source_states
        )

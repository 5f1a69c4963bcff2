"""How well a weight editor wrote a task's edits (issue 15; Meng et al. 2022 §3): per pair and side (its edits, the
evaluated model M̄; its counter edits, the contrast model M̃), efficacy, the share of the side's rewrites whose new
object becomes the top completion of the rewrite prompt; generalisation, the same over the rewrites' paraphrased
prompts (`Rewrite.paraphrases`, which the builders provide); and specificity, the share of neighbourhood prompts
(other pairs' rewrite prompts, about other subjects) whose top completion the edit leaves as the loaded model has it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..api.records import PairRecord, Rewrite
from ..scoring import left_pad
from .editing import WeightEditor, changes_the_fact
from .rome import EditTarget

NEIGHBOURS = 4
"""Neighbourhood prompts per pair: the first changing rewrite prompt (edits, else counter edits) of each of the pairs
that follow it, about other subjects."""


@dataclass(frozen=True)
class EditQualityRow:
    """One pair's edit quality: per side, how many rewrites change a fact, the efficacy (None without one), the
    generalisation (None without a paraphrase) and the specificity (None without neighbours); `succeeded` when every
    rewrite of both sides took (efficacy: generalisation is reported, not required)."""

    pair_id: str
    task: str
    rewrites: int
    efficacy: float | None
    generalisation: float | None
    specificity: float | None
    counter_rewrites: int
    counter_efficacy: float | None
    counter_generalisation: float | None
    counter_specificity: float | None

    @property
    def succeeded(self) -> bool:
        return all(value in (None, 1.0) for value in (self.efficacy, self.counter_efficacy))

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "succeeded": self.succeeded}


def top_tokens(lm: Any, sequences: Sequence[Sequence[int]]) -> list[int]:
    """The loaded model's most likely next token after each token sequence (one left-padded forward)."""
    if not sequences:
        return []
    ids, mask = left_pad(sequences, lm.pad_token_id, lm.device)
    with torch.inference_mode():
        logits = lm.model(
            input_ids=ids, attention_mask=mask, position_ids=(mask.cumsum(-1) - 1).clamp(min=0), logits_to_keep=1
        ).logits
    return logits[:, -1].argmax(-1).tolist()


def _share(hits: Sequence[bool]) -> float | None:
    return sum(hits) / len(hits) if hits else None


def edit_quality(
    editor: WeightEditor, task: str, pairs: Sequence[PairRecord], *, progress: bool = False
) -> list[EditQualityRow]:
    """Each pair's edit quality under `editor` (which knows the pairs' rewrites: `WeightEditor.learn`)."""
    lm, tokenizer = editor.lm, editor.lm.tokenizer

    def targets(rewrites: Sequence[Rewrite]) -> list[EditTarget]:
        return [EditTarget.of(tokenizer, r) for r in rewrites if changes_the_fact(r)]

    firsts = [next((r for r in (*p.rewrites, *p.counter_rewrites) if changes_the_fact(r)), None) for p in pairs]
    neighbours = [(EditTarget.of(tokenizer, r).prompt_ids, r.subject) for r in firsts if r is not None]
    owner = [k for k, r in enumerate(firsts) if r is not None]
    loaded = dict(zip((ids for ids, _ in neighbours), top_tokens(lm, [ids for ids, _ in neighbours]), strict=True))
    sides = [(p.edits, p.rewrites) for p in pairs] + [(p.counter_edits, p.counter_rewrites) for p in pairs]
    editor.prepare([state for state, _ in sides], progress=progress)
    figures: list[tuple[int, float | None, float | None, float | None]] = []
    for index, (state, rewrites) in enumerate(sides):
        written, own, k = targets(rewrites), {r.subject for r in rewrites}, index % len(pairs)
        after = [n for n, o in sorted(zip(neighbours, owner), key=lambda x: (x[1] <= k, x[1])) if o != k]
        ring = [ids for ids, subject in after if subject not in own][:NEIGHBOURS]
        paraphrased = [
            (tuple(tokenizer(wording.format(r.subject))["input_ids"]), t.target_ids[0])
            for r, t in zip((r for r in rewrites if changes_the_fact(r)), written)
            for wording in r.paraphrases
        ]
        prompts = [t.prompt_ids for t in written] + [ids for ids, _ in paraphrased] + ring
        with editor.applied(state):
            top = top_tokens(lm, prompts)
        own_top, paraphrase_top, ring_top = np.split(np.array(top), [len(written), len(written) + len(paraphrased)])
        efficacy = _share([token == t.target_ids[0] for token, t in zip(own_top, written)])
        generalisation = _share([token == target for token, (_, target) in zip(paraphrase_top, paraphrased)])
        specificity = _share([token == loaded[prompt] for token, prompt in zip(ring_top, ring)])
        figures.append((len(written), efficacy, generalisation, specificity))
    return [EditQualityRow(pair.id, task, *figures[k], *figures[len(pairs) + k]) for k, pair in enumerate(pairs)]

"""How metrics put an instance to the engine: its label request (the direct or the CoT prompt), and the token
positions of the parts of a rendered prompt (the question, the explanation), read from the tokenizer's character
offsets and checked against the engine's own encoding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import prompts
from ..api import Engine, Instance, LabelRequest

if TYPE_CHECKING:
    from ..models import LanguageModel


def label_request(
    instance: Instance,
    explanation: str | None = None,
    *,
    edits: Sequence[str] | None = None,
    question: str | None = None,
) -> LabelRequest:
    """The evaluated model's label distribution on the instance: after the direct prompt (eq. 7), or after the CoT
    prompt (Fig. 12) holding `explanation` when one is given. `edits` and `question` replace the instance's (an
    intervention)."""
    edits = instance.edits if edits is None else edits
    question = instance.question if question is None else question
    prompt = prompts.direct(edits, question) if explanation is None else prompts.cot(edits, question, explanation)
    return LabelRequest(prompt, tuple(instance.choices))


def token_offsets(
    lm: LanguageModel, text: str, expected: Sequence[int], *, continuation: bool = False
) -> list[tuple[int, int]]:
    """The character span of each token of `text` (a rendered prompt, or a continuation after one); a ValueError
    when the tokenizer's ids are not `expected`, the engine's encoding of the same text."""
    encoded = lm.tokenizer(text, add_special_tokens=not continuation and not lm.chat, return_offsets_mapping=True)
    if tuple(encoded["input_ids"]) != tuple(expected):
        raise ValueError(f"tokenizer offsets disagree with the engine's encoding for {lm.name}")
    return [(int(a), int(b)) for a, b in encoded["offset_mapping"]]


def overlapping(offsets: Sequence[tuple[int, int]], start: int, end: int) -> list[int]:
    """Indices of the tokens whose character span overlaps [start, end) (none when it is empty)."""
    return [i for i, (a, b) in enumerate(offsets) if a < end and b > start and b > a] if end > start else []


def question_positions(engine: Engine, prompt: prompts.Prompt, question: str, prefix: Sequence[int]) -> list[int]:
    """Positions among `prefix` (the engine's encoding of the rendered prompt) of the tokens of `question`, which
    ends the prompt's first (user) turn."""
    lm, turns = engine.lm, engine.editor.conversation(prompt)
    text, content = lm.render(turns), turns[0].content
    if text.find(content) < 0:
        raise ValueError(f"the rendered prompt does not contain its first turn verbatim for {lm.name}")
    end = text.find(content) + len(content)
    return overlapping(token_offsets(lm, text, prefix), end - len(question), end)

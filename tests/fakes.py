"""Stand-ins for tests: one scripted engine, which implements the `Engine` protocol, answers label requests and
generations from scripted functions of the prompt and records what it was asked (its model stub splits text into
words); and a small random Llama with a real tokenizer, for plumbing that needs real forwards."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from recoe_causaldiag.api import Encoded, LabelRequest
from recoe_causaldiag.api.records import PairRecord
from recoe_causaldiag.api.run_spec import ModelIdentity
from recoe_causaldiag.editors.editing import IN_CONTEXT
from recoe_causaldiag.models import DEFAULT_MODEL, LanguageModel
from recoe_causaldiag.prompts import Prompt, Turn, in_context


class WordLM:
    """A stand-in LanguageModel whose tokens are whitespace-separated words (they are their own ids)."""

    def __init__(self, name: str = DEFAULT_MODEL) -> None:
        self.name = name
        self.tokenizer = SimpleNamespace(decode=lambda ids, skip_special_tokens=True: " ".join(ids))

    @property
    def identity(self) -> ModelIdentity:
        return ModelIdentity(self.name, "scripted", "float32", "cpu")

    def render(self, turns: Sequence[Turn]) -> str:
        return "\n".join(f"{t.role}: {t.content}" for t in turns)

    def encode(self, text: str, continuation: bool = False) -> list[str]:
        return text.split()


class ScriptedEngine:
    """An `Engine` whose label probabilities are `probs(prompt)` and whose greedy generations are `outputs(prompt)`.

    `asked` holds every prompt whose labels were scored, `generated` every generate call as (prompts,
    max_new_tokens); the log-probability methods are not scripted and raise."""

    def __init__(
        self,
        probs: Callable[[Prompt], Sequence[float]] | None = None,
        outputs: Callable[[Prompt], str] | None = None,
        *,
        name: str = DEFAULT_MODEL,
        batch_size: int = 8,
    ) -> None:
        self.probs, self.outputs = probs, outputs
        self.lm, self.batch_size, self.progress = WordLM(name), batch_size, False
        self.editor = IN_CONTEXT
        self.asked: list[Prompt] = []
        self.generated: list[tuple[list[Prompt], int]] = []

    def encode(self, prompt: Prompt) -> Encoded:
        return Encoded(
            tuple(self.lm.encode(self.lm.render(in_context(prompt)))),
            tuple(prompt.continuation.split()),
            not prompt.continuation[-1:].isspace(),
        )

    def label_probs(self, requests: Sequence[LabelRequest], *, desc: str = "") -> list[np.ndarray]:
        if self.probs is None:
            raise AssertionError("this engine has no scripted label probabilities")
        self.asked += [r.prompt for r in requests]
        return [np.array(self.probs(r.prompt), float) for r in requests]

    def generate(self, prompts: Sequence[Prompt], *, max_new_tokens: int = 64) -> list[str]:
        if self.outputs is None:
            raise AssertionError("this engine has no scripted generations")
        self.generated.append((list(prompts), max_new_tokens))
        return [self.outputs(p) for p in prompts]

    def continuation_logprobs(self, prompts: Sequence[Prompt], *, desc: str = "") -> list[np.ndarray]:
        raise NotImplementedError("log-probabilities are not scripted")

    def perplexity(self, prompts: Sequence[Prompt], *, desc: str = "") -> np.ndarray:
        raise NotImplementedError("perplexities are not scripted")

    def continuation_logits(
        self, encoded: Sequence[Encoded], *, rows: Sequence[Sequence[int]] | None = None, desc: str = ""
    ) -> Iterator[tuple[int, object]]:
        raise NotImplementedError("logits are not scripted")

    def patched_readouts(self, *args: object, **kwargs: object) -> object:
        raise NotImplementedError("activation patching is not scripted")


def claim_pair(i: int) -> PairRecord:
    """A small FactCheck-shaped pair about claim `i`, for tests that need pairs but no dataset."""
    return PairRecord(
        f"factcheck-default-{i}",
        "factcheck",
        f"Is claim {i} true?",
        ("true", "false"),
        "true",
        (f"Claim {i} holds.",),
        (f"Claim {i} does not hold.",),
        f"Claim {i} holds, so it is true.",
        f"Claim {i} does not hold, so it is false.",
    )


def flip_a_byte(path: Path) -> None:
    """Corrupt a file without changing its size: the middle byte inverted."""
    with path.open("r+b") as handle:
        handle.seek(path.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))


def random_llama(like: LanguageModel, *, layers: int = 1, init_std: float = 0.02) -> LanguageModel:
    """A seeded random Llama (hidden size 16) with `like`'s tokenizer and chat template: fast and deterministic.
    A larger `init_std` makes its outputs depend more on the input (patching effects above numerical zero)."""
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(like.tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=init_std,
    )
    return LanguageModel("tiny", "test", LlamaForCausalLM(config).eval(), like.tokenizer, chat=True)

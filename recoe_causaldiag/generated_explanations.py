"""Model-generated explanations (paper 000 §5.5): each pair's explanations are the CoT generations of the two edited
models, M̄ (its edits) and M̃ (its counter edits), greedy and cut before the answer cue. Only pairs where both models
then give the same answer are kept, since a pair whose models disagree is not one input explained two ways.

Generations are cached on disk (SQLite, `cache_root()/generated_explanations/`) under the sha256 of the model's
identity, the editor and its settings, the token budget, the edits the prompt runs under and the rendered prompt;
the cache's `explanation` column holds the pair id the generation explains."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import prompts
from .api.engine import Engine, LabelRequest
from .api.records import PairRecord
from .mechanisms.helper_lm import HelperCache, HelperOutput
from .paths import cache_root

KIND = "cot_generation"


def generation_cache() -> HelperCache:
    return HelperCache(cache_root() / "generated_explanations" / "generations.sqlite")


def _editor_tag(engine: Engine) -> str:
    """The editor and its settings, as they shape what the model generates."""
    settings = getattr(engine.editor, "settings", None)
    return engine.editor.name if settings is None else f"{engine.editor.name}:{settings!r}"


def generation_key(engine: Engine, prompt: prompts.Prompt, max_new_tokens: int) -> str:
    identity = dataclasses.asdict(engine.lm.identity)
    rendered = engine.lm.render(engine.editor.conversation(prompt))
    parts = [identity, _editor_tag(engine), max_new_tokens, list(engine.editor.state(prompt)), rendered]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


def generate_cached(
    engine: Engine, requests: Sequence[prompts.Prompt], ids: Sequence[str], max_new_tokens: int, cache: HelperCache
) -> list[str]:
    """The engine's greedy generations of `requests` (each explaining the pair `ids[i]`), read from `cache` where
    it has them and stored there otherwise."""
    keys = [generation_key(engine, prompt, max_new_tokens) for prompt in requests]
    known = cache.get(keys)
    todo = [i for i, key in enumerate(keys) if key not in known]
    if todo:
        texts = engine.generate([requests[i] for i in todo], max_new_tokens=max_new_tokens)
        fresh = {keys[i]: HelperOutput(text, False) for i, text in zip(todo, texts, strict=True)}
        tag = f"{engine.lm.name}|{_editor_tag(engine)}"
        cache.put((key, tag, KIND, ids[i], fresh[key]) for i, key in ((i, keys[i]) for i in todo))
        known |= fresh
    return [known[key].text for key in keys]


def with_generated_explanations(
    pairs: Sequence[PairRecord], engine: Engine, max_new_tokens: int, cache: HelperCache | None = None
) -> list[PairRecord]:
    """Pairs whose explanations are the CoT generations of M̄ (edits) and M̃ (counter edits) (§5.5), each cut
    before the answer cue ("The best answer is:") that the CoT prompt adds back when the explanation is scored;
    read from and stored in `cache` when one is given."""
    requests = [prompts.cot_generation(edits, p.question) for p in pairs for edits in (p.edits, p.counter_edits)]
    if cache is None:
        outputs = engine.generate(requests, max_new_tokens=max_new_tokens)
    else:
        outputs = generate_cached(engine, requests, [p.id for p in pairs for _ in (0, 1)], max_new_tokens, cache)
    texts = [text.split(prompts.COT_ANSWER_CUE)[0].strip() for text in outputs]
    return [
        dataclasses.replace(p, explanation_faithful=texts[2 * i], explanation_unfaithful=texts[2 * i + 1])
        for i, p in enumerate(pairs)
    ]


def same_answer_pairs(
    task: str, pairs: Sequence[PairRecord], engine: Engine
) -> tuple[tuple[PairRecord, ...], dict[str, Any]]:
    """The pairs whose two edited models answer alike after their own generated CoT (each model's label after the
    CoT prompt holding its explanation), with two distinct, non-empty explanations; and the counts of what was
    left out."""
    requests = [
        LabelRequest(prompts.cot(edits, p.question, explanation), tuple(p.choices))
        for p in pairs
        for edits, explanation in ((p.edits, p.explanation_faithful), (p.counter_edits, p.explanation_unfaithful))
    ]
    probs = engine.label_probs(requests, desc="generated answers")
    answers = [int(np.argmax(row)) for row in probs]
    usable = [
        bool(p.explanation_faithful and p.explanation_unfaithful) and p.explanation_faithful != p.explanation_unfaithful
        for p in pairs
    ]
    agree = [answers[2 * k] == answers[2 * k + 1] for k in range(len(pairs))]
    kept = tuple(p for p, ok, same in zip(pairs, usable, agree, strict=True) if ok and same)
    return kept, {
        "task": task,
        "n": len(pairs),
        "n_kept": len(kept),
        "n_different_answers": sum(ok and not same for ok, same in zip(usable, agree, strict=True)),
        "n_unusable": usable.count(False),
    }

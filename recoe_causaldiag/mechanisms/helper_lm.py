"""Helper-LM rewrites of CoT explanations (Lanham et al., 2023; paper 000 §2.1, App. D, Figs. 15–16), cached on disk.

A helper LM rewrites an explanation with the paper's prompt (`prompts.adding_mistakes`: swap one word for its
antonym; `prompts.paraphrasing`: rephrase it), greedily, with max_new_tokens = min(2 × explanation tokens + 16,
128) in the helper's tokenizer. The evaluated model then answers after the CoT prompt with the rewrite in place
of the explanation (`cot_corruption.corruption_scores`).

Raw outputs are stored in SQLite (`cache_root()/helper_outputs/helper_outputs.sqlite`, one row per output,
committed in one transaction per batch) under the sha256 of (helper model name, prompt kind, rendered helper
prompt, explanation), so every evaluated model reuses them. Post-processing (`clean_rewrite`) runs on read:
1. take the first line that is not empty, an echo of the input ("Original text: …") or a lead-in ending in ":"
   with more lines after it; drop a known label at its start ("Edited text:", "Rephrased sentence:", "Output:" …);
2. cut it at the CoT answer cue "The best answer is" (helper chatter that would answer for the model);
3. strip the quotes around it (the paraphrasing prompt quotes the text) and collapse whitespace;
4. if the helper ran out of tokens (`generate_rewrites`), drop the unfinished last sentence (when a finished
   one comes before it).
A rewrite that is empty or has the explanation's words (case and punctuation ignored) is a corruption that did
not happen: `None`, and the metric scores that instance NaN.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from tqdm.auto import tqdm

from .. import prompts
from ..api import Engine, Instance, Metric
from ..models import LanguageModel
from ..paths import cache_root
from ..scoring import engine_of
from .cot_corruption import Corruption, corruption_scores

HELPER_PROMPTS: dict[str, Callable[[str], prompts.Prompt]] = {
    "adding_mistakes": prompts.adding_mistakes,
    "paraphrasing": prompts.paraphrasing,
}
MAX_NEW_TOKENS = 128
RAN_OUT_SLACK = 8

_ECHO = re.compile(r"^(?:original|input)(?: (?:text|sentence))?\s*:", re.I)
_LABEL = re.compile(
    r"^(?:here(?:'s| is) the )?(?:(?:edited|changed|modified|new|rephrased|paraphrased|rewritten)"
    r"(?: (?:text|sentence|version))?|output|paraphrase)\s*:\s*",
    re.I,
)
_QUOTES = re.compile(r'^["“”]+|["“”]+(?=[.!?]?$)')
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]])[.!?](?=\s)")


@dataclass(frozen=True)
class HelperOutput:
    """A helper's raw greedy output and whether it (nearly) used up its token budget, i.e. was likely cut off."""

    text: str
    truncated: bool


@dataclass(frozen=True)
class HelperCache:
    """Helper outputs on disk (SQLite: safe for several processes; a batch appears whole or not at all)."""

    path: Path

    @classmethod
    def default(cls) -> HelperCache:
        return cls(cache_root() / "helper_outputs" / "helper_outputs.sqlite")

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute(
            "CREATE TABLE IF NOT EXISTS outputs (key TEXT PRIMARY KEY, helper TEXT, kind TEXT, "
            "explanation TEXT, output TEXT, truncated INTEGER)"
        )
        return connection

    def get(self, keys: Sequence[str]) -> dict[str, HelperOutput]:
        with closing(self._connect()) as connection:
            rows = (
                connection.execute("SELECT output, truncated FROM outputs WHERE key = ?", (key,)).fetchone()
                for key in keys
            )
            return {key: HelperOutput(row[0], bool(row[1])) for key, row in zip(keys, rows) if row}

    def put(self, rows: Iterable[tuple[str, str, str, str, HelperOutput]]) -> None:
        """Store (key, helper, kind, explanation, output) rows; a key already stored is kept."""
        with closing(self._connect()) as connection, connection:
            connection.executemany(
                "INSERT OR IGNORE INTO outputs VALUES (?, ?, ?, ?, ?, ?)",
                [(k, h, kind, e, o.text, int(o.truncated)) for k, h, kind, e, o in rows],
            )


def cache_key(helper: str, kind: str, rendered_prompt: str, explanation: str) -> str:
    return hashlib.sha256(json.dumps([helper, kind, rendered_prompt, explanation]).encode()).hexdigest()


def token_budget(lm: LanguageModel, explanation: str) -> int:
    """max_new_tokens for one rewrite: twice the explanation's helper tokens plus 16, at most 128."""
    return min(2 * len(lm.encode(explanation, continuation=True)) + 16, MAX_NEW_TOKENS)


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def clean_rewrite(output: HelperOutput, explanation: str) -> str | None:
    """The rewritten explanation in a raw helper output (module docstring), or None if it is empty or unchanged."""
    lines = [line.strip() for line in output.text.splitlines() if line.strip()]
    text = ""
    for index, line in enumerate(lines):
        if _ECHO.match(line) or (line.endswith(":") and index + 1 < len(lines)):
            continue
        text = _LABEL.sub("", line, count=1)
        if text:
            break
    cue = text.casefold().find(prompts.COT_ANSWER_CUE.casefold())
    text = " ".join(_QUOTES.sub("", text[: cue if cue >= 0 else None].strip()).split())
    ends = list(_SENTENCE_END.finditer(text))
    if output.truncated and ends and not text.endswith((".", "!", "?")):
        text = text[: ends[-1].end()]
    return text if words(text) and words(text) != words(explanation) else None


def generate_within_budgets(
    engine: Engine, prompt_list: Sequence[prompts.Prompt], budgets: Sequence[int], desc: str
) -> list[HelperOutput]:
    """Greedy outputs, batched by similar token budget; each is cut to its own budget.

    An output ran out of tokens if it re-encodes to within `RAN_OUT_SLACK` tokens of its budget: the engine
    returns decoded, stripped text, so the count of generated tokens is only known approximately (and a
    complete rewrite is about as long as the explanation, far below twice its length plus 16)."""
    lm = engine.lm
    order = sorted(range(len(prompt_list)), key=budgets.__getitem__)
    outputs: list[HelperOutput] = [HelperOutput("", False)] * len(prompt_list)
    bar = tqdm(total=len(prompt_list), desc=desc, unit="text", disable=not engine.progress, leave=False)
    for start in range(0, len(order), engine.batch_size):
        batch = order[start : start + engine.batch_size]
        raw = engine.generate([prompt_list[i] for i in batch], max_new_tokens=max(budgets[i] for i in batch))
        for index, text in zip(batch, raw):
            ids, budget = lm.encode(text, continuation=True), budgets[index]
            kept = lm.tokenizer.decode(ids[:budget], skip_special_tokens=True).strip() if len(ids) > budget else text
            outputs[index] = HelperOutput(kept, len(ids) >= budget - RAN_OUT_SLACK)
        bar.update(len(batch))
    bar.close()
    return outputs


def generate_rewrites(texts: Sequence[str], kind: str, helper: Engine) -> list[HelperOutput]:
    """Raw helper outputs for `texts` under the `kind` prompt, each within its `token_budget`."""
    build = HELPER_PROMPTS[kind]
    return generate_within_budgets(
        helper,
        [build(text) for text in texts],
        [token_budget(helper.lm, text) for text in texts],
        desc=f"helper {kind}",
    )


def rewrite(
    explanations: Sequence[str], kind: str, helper: Engine, cache_store: HelperCache | None = None
) -> dict[str, str | None]:
    """Explanation → cleaned helper rewrite (None where the corruption failed), generating only uncached ones."""
    store = cache_store or HelperCache.default()
    texts = [text for text in dict.fromkeys(explanations) if text.strip()]
    keys = [cache_key(helper.lm.name, kind, helper.lm.render(HELPER_PROMPTS[kind](t).turns), t) for t in texts]
    stored = store.get(keys)
    todo = [(key, text) for key, text in zip(keys, texts) if key not in stored]
    if todo:
        fresh = generate_rewrites([text for _, text in todo], kind, helper)
        store.put((key, helper.lm.name, kind, text, out) for (key, text), out in zip(todo, fresh))
        stored.update({key: out for (key, _), out in zip(todo, fresh)})
    cleaned = {text: clean_rewrite(stored[key], text) for key, text in zip(keys, texts)}
    return {text: cleaned.get(text) for text in explanations}


@dataclass(frozen=True)
class HelperCorruption:
    """A CoT corruption done by a helper LM over the whole explanation: its prompt kind and variant prefix."""

    kind: str
    name: str

    @property
    def variants(self) -> tuple[str, ...]:
        return (f"{self.name}-continuous", f"{self.name}-binary")

    def scores(
        self, instances: Sequence[Instance], engine: Engine, helper: str | None, desc: str
    ) -> dict[str, np.ndarray]:
        """`corruption_scores` with the rewrites of `helper` (None: the default helper, `engine_of`); NaN where the
        helper's rewrite failed."""
        helper_lm = engine_of(helper, engine, role="helper LM")
        rewrites = rewrite([i.explanation for i in instances], self.kind, helper_lm)
        corruption = Corruption(self.name, lambda explanation: rewrites[explanation] or explanation)
        scores = corruption_scores(instances, engine, [corruption], desc=desc)
        failed = np.array([rewrites[i.explanation] is None for i in instances], bool)
        return {variant: np.where(failed, np.nan, values) for variant, values in scores.items()}


class HelperMetric(Metric):
    """A metric whose corrupted explanations a helper LM writes; `helper` names it (None: another packaged model
    than the evaluated one, `packaged_models.default_helper_model`; a run records it in its `run_spec`)."""

    evaluate_options: ClassVar[tuple[str, ...]] = ("helper",)
    helper_option: ClassVar[str | None] = "helper"

    def __init__(self, helper: str | None = None) -> None:
        self.helper = helper

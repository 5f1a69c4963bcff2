"""ReCoE's own evaluation (paper 003 §4.3, §5.1) under an editor: in-context editing (ICE: the counterfactual facts
are given as new facts before the question, Fig. 10 of paper 000) or a weight editor (ROME, MEMIT: each item's
counterfactual facts written into the weights from its rewrites, as paper 003 §5 evaluates them).

- correct_flip: among the items the unedited model answers with the original answer, the share the edited model
  answers with the counterfactual answer. Answers are generated greedily and matched against the answer and its
  aliases (case, accents, articles, punctuation and digit separators ignored; the earlier match wins when both
  answers appear). `counterfactual_accuracy` is the share of all items answered with the counterfactual answer.
- fact-wise editing effectiveness: with PPL(F) and PPL(CF) the mean perplexity of an item's fact and
  counterfactual-fact sentences and Δ = PPL(F) − PPL(CF), an item is edited effectively when Δ after editing
  exceeds max(0, Δ before editing). A fact's perplexity is that of the sentence as the first step of the CoT answer
  to the item's question (Fig. 12 of paper 000), with and without the edits."""

from __future__ import annotations

import dataclasses
import re
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from ... import __version__, prompts
from ...api.records import PairRecord
from ...api.registry import UnknownNameError
from ...api.run_spec import EDITORS
from ...editors.editing import WeightEditor, editor_options, make_editor
from ...models import LanguageModel, load_model
from ...report import format_number
from ...scoring import ScoringEngine
from ...task_pairs import iter_task_pairs
from . import RECOE_SCHEMES

SCHEMA_VERSION = "1.0"
PROMPT_STYLES = ("direct", "cot")
MAX_NEW_TOKENS = {"direct": 24, "cot": 96}
_ARTICLES = re.compile(r"\b(?:the|a|an)\b")


@dataclass(frozen=True)
class RecoeEvalSpec:
    """Everything that determines a ReCoE evaluation's numbers; written into its results file."""

    model: str
    editor: str = "ice"
    prompt: str = "direct"
    schemes: tuple[str, ...] = RECOE_SCHEMES
    limit: int | None = None
    seed: int = 0
    batch_size: int = 32
    editor_options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.editor not in EDITORS:
            raise UnknownNameError("editor", self.editor, list(EDITORS))
        if self.editor_options:
            editor_options(self.editor, self.editor_options)
        if self.prompt not in PROMPT_STYLES:
            raise UnknownNameError("prompt style", self.prompt, list(PROMPT_STYLES))
        for scheme in self.schemes:
            if scheme not in RECOE_SCHEMES:
                raise UnknownNameError("recoe scheme", scheme, list(RECOE_SCHEMES))
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")


@dataclass(frozen=True)
class RecoeItem:
    """A ReCoE datapoint as the evaluation needs it, read from a `recoe/<scheme>` row."""

    id: str
    scheme: str
    question: str
    answer_forms: tuple[str, ...]
    counterfactual_forms: tuple[str, ...]
    facts: tuple[str, ...]
    counterfactual_facts: tuple[str, ...]

    @classmethod
    def from_record(cls, record: PairRecord) -> RecoeItem:
        meta = record.meta
        return cls(
            record.id,
            meta["scheme"],
            meta["recoe_question"],
            (meta["answer"], *meta["answer_aliases"]),
            (meta["counterfactual_answer"], *meta["counterfactual_answer_aliases"]),
            tuple(f["sentence"] for f in meta["facts"]),
            tuple(f["sentence"] for f in meta["counterfactual_facts"]),
        )


def normalise(text: str) -> str:
    """Lower case, no accents, no digit separators, no articles, punctuation as spaces."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(c))
    folded = re.sub(r"(?<=\d),(?=\d{3})", "", folded)
    folded = re.sub(r"[^\w\s]", " ", folded)
    return " ".join(_ARTICLES.sub(" ", folded).split())


def _first_match(text: str, forms: Sequence[str]) -> int | None:
    found = [
        m.start()
        for form in forms
        if (f := normalise(form))
        for m in [re.search(rf"(?<!\w){re.escape(f)}(?!\w)", text)]
        if m
    ]
    return min(found) if found else None


def match(prediction: str, answer_forms: Sequence[str], counterfactual_forms: Sequence[str]) -> str:
    """`answer`, `counterfactual` or `none`: which answer the prediction states (the earlier one if both)."""
    text = normalise(prediction)
    original, counterfactual = _first_match(text, answer_forms), _first_match(text, counterfactual_forms)
    if original is None and counterfactual is None:
        return "none"
    if counterfactual is None or (original is not None and original < counterfactual):
        return "answer"
    if original is None or counterfactual < original:
        return "counterfactual"
    return "none"


def final_answer(generation: str, style: str) -> str:
    """The part of a generation that is the answer: after the CoT answer cue, or the first line of a direct one."""
    if style == "cot":
        return (
            generation.rsplit(prompts.COT_ANSWER_CUE, 1)[-1].strip()
            if prompts.COT_ANSWER_CUE in generation
            else generation.strip()
        )
    return next((line.strip() for line in generation.splitlines() if line.strip()), "")


def question_prompt(question: str, edits: Sequence[str], style: str) -> prompts.Prompt:
    """The question under the edits when there are any (ICE: as new facts before it), asked directly or for CoT
    (Fig. 12)."""
    text = prompts.COT_INSTRUCTION + question if style == "cot" else question
    turns = (prompts.user(text), prompts.assistant(prompts.COT_OPENING)) if style == "cot" else (prompts.user(text),)
    return prompts.Prompt(turns, edits=tuple(edits) if edits else None)


def fact_prompt(question: str, edits: Sequence[str], fact: str) -> prompts.Prompt:
    """A fact sentence as the first step of the CoT answer to the question (for its perplexity)."""
    frame = question_prompt(question, edits, "cot")
    return dataclasses.replace(frame, continuation=f" {fact}")


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n else None


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if len(values) else None


def scheme_summary(scheme: str, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """correct_flip, accuracies and fact-wise editing effectiveness of one scheme's items."""
    original = [r for r in rows if r["match_before"] == "answer"]
    return {
        "scheme": scheme,
        "n": len(rows),
        "original_accuracy": _rate(len(original), len(rows)),
        "n_original": len(original),
        "correct_flip": _rate(sum(r["match_after"] == "counterfactual" for r in original), len(original)),
        "n_flipped": sum(r["match_after"] == "counterfactual" for r in original),
        "counterfactual_accuracy": _rate(sum(r["match_after"] == "counterfactual" for r in rows), len(rows)),
        **{
            name: _mean([r["ppl"][name] for r in rows])
            for name in ("facts_before", "counterfactuals_before", "facts_after", "counterfactuals_after")
        },
        "fact_edit_effectiveness": _rate(sum(r["fact_edit_success"] for r in rows), len(rows)),
    }


def _perplexities(items: Sequence[RecoeItem], engine: ScoringEngine) -> list[dict[str, float]]:
    """Mean perplexity of each item's facts and counterfactual facts, before and after editing."""
    requests, spans = [], []
    for item in items:
        for edits in ((), item.counterfactual_facts):
            for sentences in (item.facts, item.counterfactual_facts):
                spans.append((len(requests), len(requests) + len(sentences)))
                requests += [fact_prompt(item.question, edits, s) for s in sentences]
    ppl = engine.perplexity(requests, desc="fact perplexity")
    means = [float(np.mean(ppl[a:b])) for a, b in spans]
    names = ("facts_before", "counterfactuals_before", "facts_after", "counterfactuals_after")
    return [dict(zip(names, means[4 * i : 4 * i + 4])) for i in range(len(items))]


def edited_effectively(ppl: dict[str, float]) -> bool:
    """§5.1: Δ = PPL(F) − PPL(CF) after editing exceeds max(0, Δ before editing)."""
    before = ppl["facts_before"] - ppl["counterfactuals_before"]
    return ppl["facts_after"] - ppl["counterfactuals_after"] > max(0.0, before)


def evaluate_recoe(
    spec: RecoeEvalSpec, *, lm: LanguageModel | None = None, data_dir: Path | None = None, progress: bool = True
) -> dict[str, Any]:
    """The ReCoE evaluation document: per scheme and per item, one model loaded once, all schemes batched together."""
    started = time.perf_counter()
    pairs, versions = [], {}
    tasks = [f"recoe/{scheme}" for scheme in spec.schemes]
    for task_pairs in iter_task_pairs(tasks, data_dir, limit=spec.limit, seed=spec.seed):
        versions[task_pairs.task] = task_pairs.dataset.version
        pairs += task_pairs.pairs
    items = [RecoeItem.from_record(p) for p in pairs]
    lm = lm or load_model(spec.model)
    editor = make_editor(spec.editor, lm, spec.editor_options)
    if isinstance(editor, WeightEditor):
        editor.learn(pairs)
    engine = ScoringEngine(lm, editor=editor, batch_size=spec.batch_size, progress=progress)
    requests = [
        question_prompt(i.question, edits, spec.prompt) for i in items for edits in ((), i.counterfactual_facts)
    ]
    generations = engine.generate(requests, max_new_tokens=MAX_NEW_TOKENS[spec.prompt])
    perplexities = _perplexities(items, engine)
    rows = []
    for n, (item, ppl) in enumerate(zip(items, perplexities)):
        before, after = (final_answer(g, spec.prompt) for g in generations[2 * n : 2 * n + 2])
        rows.append(
            {
                "id": item.id,
                "scheme": item.scheme,
                "prediction_before": before,
                "prediction_after": after,
                "match_before": match(before, item.answer_forms, item.counterfactual_forms),
                "match_after": match(after, item.answer_forms, item.counterfactual_forms),
                "ppl": ppl,
                "fact_edit_success": edited_effectively(ppl),
            }
        )
    return {
        "schema_version": SCHEMA_VERSION,
        "model": dataclasses.asdict(lm.identity),
        "editor": spec.editor,
        "prompt": spec.prompt,
        "dataset_versions": versions,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "run_spec": {
            **dataclasses.asdict(spec),
            "package_version": __version__,
            "editor_statistics": editor.statistics() if isinstance(editor, WeightEditor) else [],
            "editor_settings": editor.resolved_settings() if isinstance(editor, WeightEditor) else None,
        },
        "seconds": time.perf_counter() - started,
        "results": [scheme_summary(s, [r for r in rows if r["scheme"] == s]) for s in spec.schemes],
        "items": rows,
    }


def recoe_table(doc: dict[str, Any]) -> str:
    """The per-scheme results as a Markdown table."""
    lines = [
        f"ReCoE evaluation: {doc['model']['name']}, editor {doc['editor']}, prompt {doc['prompt']}",
        "",
        "| scheme | n | original acc. | correct_flip | counterfactual acc. | fact-edit effectiveness |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['scheme']} | {r['n']} | {format_number(r['original_accuracy'])} | "
        f"{format_number(r['correct_flip'])} ({r['n_flipped']}/{r['n_original']}) | "
        f"{format_number(r['counterfactual_accuracy'])} | {format_number(r['fact_edit_effectiveness'])} |"
        for r in doc["results"]
    ]
    return "\n".join(lines)

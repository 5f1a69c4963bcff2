"""Object Counting's symmetric counterfactual for activation patching (CaF, paper 002 §3.1): just enough items
re-typed in the edits ("X is T.") that the count, and so the designed answer, flips; each new type is one of the
pair's own types with as many tokens for the evaluated tokenizer as the one it replaces."""

from __future__ import annotations

import re

from ..api import Counterfactual, Instance, TokenCounter


def _target_count(question_type: str, count: int, n_items: int, question: str) -> int | None:
    """The count under which the question's designed answer flips."""
    if question_type == "number":
        options = [int(n) for n in re.findall(r"\(\w\) (\d+)", question)]
        others = [n for n in options if n != count]
        return others[0] if len(options) == 2 and len(others) == 1 else None
    if question_type == "any":
        return 0 if count > 0 else 1
    if question_type == "all":
        return n_items - 1 if count == n_items else n_items
    return None


def counting_counterfactual(instance: Instance, tokens: TokenCounter) -> Counterfactual | None:
    """The re-typed edits, or None when no equal-length re-typing flips the answer."""
    meta = instance.meta
    items, types, target = meta.get("items", []), meta.get("types_edits", []), meta.get("target_type")
    edits = list(instance.edits)
    if not target or len(items) != len(types) or edits != [f"{i} is {t}." for i, t in zip(items, types)]:
        return None
    count = sum(t == target for t in types)
    wanted = _target_count(meta.get("question_type", ""), count, len(items), instance.question)
    if wanted is None or wanted == count:
        return None
    size = tokens(f" {target}")
    others = [t for t in dict.fromkeys(types + meta.get("types_counter_edits", [])) if t != target]
    if wanted > count:
        chosen = [k for k, t in enumerate(types) if t != target and tokens(f" {t}") == size][: wanted - count]
        new_type = target
    else:
        same = [t for t in others if tokens(f" {t}") == size]
        chosen = [k for k, t in enumerate(types) if t == target][: count - wanted] if same else []
        new_type = same[0] if same else target
    if len(chosen) != abs(wanted - count):
        return None
    for k in chosen:
        edits[k] = f"{items[k]} is {new_type}."
    return Counterfactual(tuple(edits), instance.question)

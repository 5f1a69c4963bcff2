"""FactCheck's symmetric counterfactual for activation patching (CaF, paper 002 §3.1): the edit that states
another object for the asked (subject, relation) is made to state the asked object, which turns "No" into "Yes"
with an input of the same token length wherever the two objects are."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from ..api import Counterfactual, Instance, TokenCounter
from .factcheck import load_relations


@cache
def _patterns() -> tuple[tuple[re.Pattern[str], re.Pattern[str], str], ...]:
    """(statement regex, question regex, statement template) of every curated FactCheck relation."""

    def pattern(template: str) -> re.Pattern[str]:
        parts = re.split(r"(\{subject\}|\{object\})", template)
        return re.compile("".join(f"(?P<{p[1:-1]}>.+?)" if p.startswith("{") else re.escape(p) for p in parts))

    return tuple((pattern(r.statement), pattern(r.question), r.statement) for r in load_relations().values())


def parsed_flip(question: str, edits: Sequence[str]) -> Counterfactual | None:
    """Parse the question and an edit with one relation's templates (same subject, another object) and make that
    edit state the asked object."""
    for statement, asked, template in _patterns():
        query = asked.fullmatch(question)
        if query is None:
            continue
        for k, edit in enumerate(edits):
            stated = statement.fullmatch(edit.removesuffix("."))
            if stated and stated["subject"] == query["subject"] and stated["object"] != query["object"]:
                flipped = template.format(subject=query["subject"], object=query["object"]) + "."
                return Counterfactual(tuple(edits[:k]) + (flipped,) + tuple(edits[k + 1 :]), question)
    return None


def factcheck_counterfactual(instance: Instance, tokens: TokenCounter) -> Counterfactual | None:
    """From the pair's metadata (edited and true object) when it has them, else by parsing the inputs."""
    meta = instance.meta
    old, new = meta.get("object_edit"), meta.get("object_true")
    if old and new:
        tail = f"{old}."
        if any(e.endswith(tail) for e in instance.edits):
            return Counterfactual(
                tuple(e.removesuffix(tail) + f"{new}." if e.endswith(tail) else e for e in instance.edits),
                instance.question,
            )
    return parsed_flip(instance.question, instance.edits)

"""The `evaluate` cards' Python examples, each executed once per test session (several tests read the results). A
Python block may be followed by an ```` ```text ```` block that opens with `Output:`: what the example prints, which
the tests compare with what it printed."""

from __future__ import annotations

import contextlib
import functools
import io
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from recoe_causaldiag.hub_modules import ensure_hub_modules

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = re.compile(r"```python\n(.*?)```(?:\n+```text\nOutput:\n(.*?)```)?", re.S)


@dataclass(frozen=True)
class Example:
    code: str
    documented_output: str | None


def card_blocks(name: str) -> list[Example]:
    """The Python examples of `metrics_evaluate/<name>/README.md`, in order, each with the output the card shows
    for it (None where it shows none)."""
    text = (ROOT / "metrics_evaluate" / name / "README.md").read_text(encoding="utf-8")
    return [Example(code, output or None) for code, output in _BLOCK.findall(text)]


def card_examples(name: str) -> list[str]:
    """The Python code blocks of the card, in order."""
    return [example.code for example in card_blocks(name)]


@functools.cache
def card_run(name: str) -> tuple[dict, tuple[str, ...]]:
    """The globals that the card's examples leave and what each printed, run as a reader would after set-up: from
    a folder outside the repository, the modules loaded by Hub id from evaluate's module cache (the Hub is off in
    tests)."""
    ensure_hub_modules()
    namespace: dict = {}
    printed = []
    with tempfile.TemporaryDirectory() as elsewhere, contextlib.chdir(elsewhere):
        for example in card_blocks(name):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                exec(compile(example.code, f"metrics_evaluate/{name}/README.md", "exec"), namespace)
            printed.append(out.getvalue())
    return namespace, tuple(printed)


def card_namespace(name: str) -> dict:
    return card_run(name)[0]

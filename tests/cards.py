"""The `evaluate` cards' Python examples, each executed once per test session (several tests read the results)."""

from __future__ import annotations

import contextlib
import functools
import re
import tempfile
from pathlib import Path

from recoe_causaldiag.hub_modules import ensure_hub_modules

ROOT = Path(__file__).resolve().parents[1]


def card_examples(name: str) -> list[str]:
    """The Python code blocks of `metrics_evaluate/<name>/README.md`, in order."""
    return re.findall(r"```python\n(.*?)```", (ROOT / "metrics_evaluate" / name / "README.md").read_text(), re.S)


@functools.cache
def card_namespace(name: str) -> dict:
    """The globals that the card's examples leave, run as a reader would after set-up: from a folder outside the
    repository, the modules loaded by Hub id from evaluate's module cache (the Hub is off in tests)."""
    ensure_hub_modules()
    namespace: dict = {}
    with tempfile.TemporaryDirectory() as elsewhere, contextlib.chdir(elsewhere):
        for code in card_examples(name):
            exec(compile(code, f"metrics_evaluate/{name}/README.md", "exec"), namespace)
    return namespace

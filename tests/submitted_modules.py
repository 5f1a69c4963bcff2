"""Source text of submitted `evaluate` modules for the sandbox tests: one metric class with the leaderboard's input
features, whose `_compute` body each test writes."""

from __future__ import annotations

import textwrap

MODULE = """{preamble}
import datasets
import evaluate


class {name}(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="{name}", citation="", inputs_description="",
            features=datasets.Features({{"question": datasets.Value("string"),
                "choices": datasets.List(datasets.Value("string")),
                "edits": datasets.List(datasets.Value("string")), "explanations": datasets.Value("string")}}))

    def _compute(self, question, choices, edits, explanations, model=None):
{body}
"""


def submitted_module(name: str, compute_body: str, preamble: str = "") -> str:
    """A module defining the metric class `name` whose `_compute` runs `compute_body`, after `preamble` (imports and
    helpers at module level)."""
    body = textwrap.indent(textwrap.dedent(compute_body).strip("\n"), " " * 8)
    return MODULE.format(preamble=textwrap.dedent(preamble).strip("\n"), name=name, body=body)

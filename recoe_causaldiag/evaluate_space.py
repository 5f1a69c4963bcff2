"""The page of an `evaluate` module's Space (its `app.py`): a table of the module's input columns with one row per
input, the module's options as a JSON object, and the result of `compute`, above the module's card. (evaluate's own
`launch_gradio_widget` builds its page from Gradio 3 components that Gradio 6 no longer has.)"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def example_rows(columns: Sequence[str], kinds: Sequence[str], example: Mapping[str, Sequence[Any]]) -> list[list]:
    """The example inputs as table rows: list-valued columns written as JSON, text and numbers as they are."""
    count = len(next(iter(example.values()))) if example else 0
    return [
        [json.dumps(example[c][i]) if kind == "json" else example[c][i] for c, kind in zip(columns, kinds)]
        for i in range(count)
    ]


def json_safe(value: Any) -> Any:
    """A result with NaN and infinities as None (JSON has no such numbers) and NumPy values as Python ones."""
    if isinstance(value, Mapping):
        return {key: json_safe(v) for key, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist"):
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def module_page(module: Any, card: Path):
    """The Gradio page of a loaded `evaluate` module whose card is `card`."""
    import gradio as gr
    from evaluate.utils.gradio import infer_gradio_input_types, json_to_string_type, parse_gradio_data, parse_readme

    from .evaluate_modules import example_inputs

    features = module.features[0] if isinstance(module.features, list) else module.features
    columns, kinds = list(features), infer_gradio_input_types(list(features.values()))

    def compute(table, options_text: str) -> Any:
        try:
            options = json.loads(options_text or "{}")
        except json.JSONDecodeError as err:
            raise gr.Error(f"options must be a JSON object: {err}") from None
        if not isinstance(options, dict):
            raise gr.Error("options must be a JSON object, e.g. {}")
        try:
            inputs = parse_gradio_data(table, kinds)
            return json_safe(module.compute(**inputs, **options))
        except (ValueError, TypeError, KeyError) as err:
            raise gr.Error(str(err)) from None

    with gr.Blocks(title=f"Metric: {module.name}") as page:
        gr.Markdown(f"# {module.name}\n\n{module.info.description}")
        table = gr.Dataframe(
            value=example_rows(columns, kinds, example_inputs(module.name)) or None,
            headers=columns,
            datatype=json_to_string_type(kinds),
            column_count=(len(columns), "fixed"),
            label='Inputs, one row each (list columns as JSON, e.g. ["Yes", "No"])',
            interactive=True,
        )
        options = gr.Textbox(value="{}", label='Options (a JSON object, e.g. {"variant": "...", "seed": 0})')
        run = gr.Button("Compute", variant="primary")
        result = gr.JSON(label="Result")
        run.click(compute, [table, options], result, api_name="compute")
        gr.Markdown(parse_readme(card))
    return page

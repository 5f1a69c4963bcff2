"""Writing a run's results: the JSON document, a Markdown table and a plot with 95% CI error bars; and how
estimates are shown anywhere (the one number format, the one CI bar chart)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .api.rows import without_nans

TINY_MODEL_CAVEAT = (
    "{model} is a tiny model and a weak classifier (its label probabilities carry a strong bias); "
    "these numbers exercise the pipeline and are not evidence about faithfulness metrics on capable LLMs."
)
TINY_MODELS = ("smollm2-135m-instruct", "gemma-3-270m")


def format_number(value: float | None, spec: str = ".3f") -> str:
    """A number for a table cell in the format `spec`; "n/a" when there is none (None or NaN)."""
    return "n/a" if value is None or math.isnan(value) else format(value, spec)


def format_p_value(value: float | None) -> str:
    return "<0.001" if value is not None and value < 0.001 else format_number(value)


def _interval(entry: Mapping[str, Any]) -> str:
    return f"[{format_number(entry['ci_low'])}, {format_number(entry['ci_high'])}]"


def caveat(model_name: str) -> str | None:
    return TINY_MODEL_CAVEAT.format(model=model_name) if model_name in TINY_MODELS else None


def markdown_table(doc: Mapping[str, Any]) -> str:
    """Diagnosticity per task, metric and variant, then edit reliability."""
    model = doc["model"]["name"]
    lines = [f"Model: `{model}` · editor: {doc['editor']} · explanations: {doc['explanations']}", ""]
    if caveat(model):
        lines += [f"> {caveat(model)}", ""]
    lines += ["| task | metric | variant | D | 95% CI | p (vs 0.5) | n valid / n |", "|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        sig = "*" if r["p_value"] is not None and r["p_value"] < 0.05 else ""
        lines.append(
            f"| {r['task']} | {r['metric']} | {r['variant']} | {format_number(r['diagnosticity'])}{sig} | "
            f"{_interval(r)} | {format_p_value(r['p_value'])} | {r['n_valid']} / {r['n']} |"
        )
    lines += [
        "",
        "`*`: significantly different from 0.5 (one-sample t-test, p < 0.05).",
        "",
        "| task | edit reliability | 95% CI | n |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {e['task']} | {format_number(e['value'])} | {_interval(e)} | {e['n']} |" for e in doc["edit_reliability"]
    ]
    return "\n".join(lines) + "\n"


def _bars(doc: Mapping[str, Any]) -> list[tuple[str, str, float, float, float]]:
    """(label, colour group, value, CI low, CI high) of every diagnosticity and edit reliability with a value."""
    bars = [
        (f"{r['task']} · {r['metric']} · {r['variant']}", r["metric"], r["diagnosticity"], r["ci_low"], r["ci_high"])
        for r in doc["results"]
    ]
    bars += [
        (f"{e['task']} · edit reliability", "edit reliability", e["value"], e["ci_low"], e["ci_high"])
        for e in doc["edit_reliability"]
    ]
    return [b for b in bars if b[2] is not None and not math.isnan(b[2])]


def ci_bar_chart(
    bars: Sequence[tuple[str, float, float, float]],
    colors: str | Sequence[str],
    xlabel: str,
    *,
    bar_height: float,
    title: str | None = None,
) -> Any:
    """A matplotlib figure of horizontal bars (label, value, CI low, CI high), top to bottom, with their CIs as
    error bars on [0, 1] and chance (0.5) as a dashed line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 1.4 + bar_height * max(len(bars), 1)))
    ax.barh(
        range(len(bars)),
        [b[1] for b in bars],
        color=colors,
        alpha=0.85,
        capsize=2,
        xerr=[[b[1] - b[2] for b in bars], [b[3] - b[1] for b in bars]],
    )
    ax.axvline(0.5, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(xlabel)
    if title is not None:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig


def plot(doc: Mapping[str, Any], path: Path) -> None:
    """Horizontal bars with 95% bootstrap CIs: diagnosticity per metric variant and edit reliability per task;
    the dashed line is chance (0.5)."""
    bars = _bars(doc)
    palette: dict[str, str] = {}
    for _, group, *_ in bars:
        palette.setdefault(group, f"C{len(palette)}")
    model = doc["model"]["name"]
    title = f"{model} · {doc['editor']} · {doc['explanations']} explanations"
    fig = ci_bar_chart(
        [(label, value, low, high) for label, _, value, low, high in bars],
        [palette[group] for _, group, *_ in bars],
        "causal diagnosticity D / edit reliability (95% bootstrap CI); dashed: chance",
        bar_height=0.28,
        title=title + ("\n(tiny model: pipeline demonstration, not evidence about metrics)" if caveat(model) else ""),
    )
    fig.savefig(path, dpi=130)


def write_results(doc: Mapping[str, Any], path: Path) -> tuple[Path, Path, Path]:
    """Write FILE.json, FILE.md and FILE.png; return the three paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = without_nans(doc)
    path.write_text(json.dumps(clean, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    table = path.with_suffix(".md")
    table.write_text(markdown_table(clean), encoding="utf-8")
    figure = path.with_suffix(".png")
    plot(clean, figure)
    return path, table, figure

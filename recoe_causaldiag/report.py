"""Writing a run's results: the JSON document, a Markdown table and a plot with 95% CI error bars."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

TINY_MODEL_CAVEAT = (
    "{model} is a tiny model and a weak classifier (its label probabilities carry a strong bias); "
    "these numbers exercise the pipeline and are not evidence about faithfulness metrics on capable LLMs."
)
TINY_MODELS = ("smollm2-135m-instruct", "gemma-3-270m")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, Mapping):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _p(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


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
        lines.append(f"| {r['task']} | {r['metric']} | {r['variant']} | {_fmt(r['diagnosticity'])}{sig} | "
                     f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}] | {_p(r['p_value'])} | {r['n_valid']} / {r['n']} |")
    lines += ["", "`*`: significantly different from 0.5 (one-sample t-test, p < 0.05).", "",
              "| task | edit reliability | 95% CI | n |", "|---|---|---|---|"]
    lines += [f"| {e['task']} | {_fmt(e['value'])} | [{_fmt(e['ci_low'])}, {_fmt(e['ci_high'])}] | {e['n']} |"
              for e in doc["edit_reliability"]]
    return "\n".join(lines) + "\n"


def _bars(doc: Mapping[str, Any]) -> list[tuple[str, str, float, float, float]]:
    """(label, colour group, value, CI low, CI high) of every diagnosticity and edit reliability with a value."""
    bars = [(f"{r['task']} · {r['metric']} · {r['variant']}", r["metric"], r["diagnosticity"], r["ci_low"], r["ci_high"])
            for r in doc["results"]]
    bars += [(f"{e['task']} · edit reliability", "edit reliability", e["value"], e["ci_low"], e["ci_high"])
             for e in doc["edit_reliability"]]
    return [b for b in bars if b[2] is not None and not math.isnan(b[2])]


def plot(doc: Mapping[str, Any], path: Path) -> None:
    """Horizontal bars with 95% bootstrap CIs: diagnosticity per metric variant and edit reliability per task;
    the dashed line is chance (0.5)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = _bars(doc)
    palette: dict[str, str] = {}
    for _, group, *_ in bars:
        palette.setdefault(group, f"C{len(palette)}")
    fig, ax = plt.subplots(figsize=(9, 1.4 + 0.28 * max(len(bars), 1)))
    ax.barh(range(len(bars)), [b[2] for b in bars], color=[palette[b[1]] for b in bars], alpha=0.85, capsize=2,
            xerr=[[b[2] - b[3] for b in bars], [b[4] - b[2] for b in bars]])
    ax.axvline(0.5, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("causal diagnosticity D / edit reliability (95% bootstrap CI); dashed: chance")
    model = doc["model"]["name"]
    title = f"{model} · {doc['editor']} · {doc['explanations']} explanations"
    ax.set_title(title + ("\n(tiny model: pipeline demonstration, not evidence about metrics)" if caveat(model) else ""),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def write_results(doc: Mapping[str, Any], path: Path) -> tuple[Path, Path, Path]:
    """Write FILE.json, FILE.md and FILE.png; return the three paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = _clean(doc)
    path.write_text(json.dumps(clean, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    table = path.with_suffix(".md")
    table.write_text(markdown_table(clean), encoding="utf-8")
    figure = path.with_suffix(".png")
    plot(clean, figure)
    return path, table, figure

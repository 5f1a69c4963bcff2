"""Writing a run's results: the JSON document, a Markdown table and a plot with 95% CI error bars; and how
estimates are shown anywhere (the one number format, the one CI bar chart)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .api.rows import without_nans
from .statistics import ABOVE, ALPHA, BELOW, MIN_N_VALID, direction_marker

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


def _interval_of(entry: Mapping[str, Any], name: str) -> str:
    """The CI of the figure `name` of an entry (`<name>_ci_low`, `<name>_ci_high`); "n/a" where it has none."""
    return f"[{format_number(entry.get(f'{name}_ci_low'))}, {format_number(entry.get(f'{name}_ci_high'))}]"


def _marked(value: float | None, p_adjusted: float | None) -> str:
    """A diagnosticity with its direction marker (▲ above, ▼ below 0.5 on the adjusted p); none where the entry
    has no adjusted p (results files before schema 1.2)."""
    return format_number(value) + direction_marker(value, p_adjusted)


def _coverage(entry: Mapping[str, Any]) -> str:
    """'coverage (n valid / n)'; the coverage "n/a" where the entry does not record it (before schema 1.2)."""
    return f"{format_number(entry.get('coverage'))} ({entry['n_valid']} / {entry['n']})"


STATISTICS_FOOTNOTE = (
    f"{ABOVE} / {BELOW}: significantly above / below 0.5, Holm–Bonferroni adjusted p < {ALPHA} across every test in "
    "the file (D, D_swap and D_sym of every row). p (sign): exact two-sided sign test of d against 0.5, a tie "
    "counted as half a win and half a loss, by cluster where pairs share an entity; p (Holm): that p adjusted; "
    "p (t-test): the paper's one-sample t-test against 0.5, for comparison. 95% CI: the hull of a seeded percentile "
    "bootstrap (whole clusters resampled where the dataset names them) and the Wilson score interval, never a "
    "point. Coverage: the share of pairs the metric scored (n valid / n); D is over the scored pairs, while "
    f"rankings and Copeland scores count a declined pair as a tie (0.5) and skip rows with fewer than {MIN_N_VALID} "
    "scored pairs."
)


def markdown_table(doc: Mapping[str, Any]) -> str:
    """Diagnosticity per task, metric and variant, then the model-side controls: edit reliability and task
    accuracy."""
    model = doc["model"]["name"]
    lines = [f"Model: `{model}` · editor: {doc['editor']} · explanations: {doc['explanations']}", ""]
    if caveat(model):
        lines += [f"> {caveat(model)}", ""]
    lines += _diagnosticity_section(doc) + [""] + _reliability_section(doc) + [""] + _accuracy_section(doc)
    lines += _edit_quality_section(doc) + _generation_section(doc)
    return "\n".join(lines) + "\n"


def _diagnosticity_section(doc: Mapping[str, Any]) -> list[str]:
    """D_sym (the headline where roles were swapped), D and D_swap of every metric variant."""
    lines = [
        "| task | metric | variant | D_sym | 95% CI | D | 95% CI | p (sign) | p (Holm) | p (t-test) | D_swap | 95% CI "
        "| coverage (n valid / n) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["results"]:
        lines.append(
            f"| {r['task']} | {r['metric']} | {r['variant']} | {_marked(r.get('d_sym'), r.get('d_sym_p_adjusted'))} | "
            f"{_interval_of(r, 'd_sym')} | {_marked(r['diagnosticity'], r.get('p_adjusted'))} | {_interval(r)} | "
            f"{format_p_value(r['p_value'])} | {format_p_value(r.get('p_adjusted'))} | "
            f"{format_p_value(r.get('p_ttest'))} | {_marked(r.get('d_swap'), r.get('d_swap_p_adjusted'))} | "
            f"{_interval_of(r, 'd_swap')} | {_coverage(r)} |"
        )
    return lines + [
        "",
        "D: the evaluated model M̄ (the pair's `edits`) scores both explanations. D_swap: the same with the roles "
        "swapped (the contrast model's `counter_edits` in context, the unfaithful explanation counted as the "
        "faithful one). D_sym: the mean over pairs of (d + d_swap) / 2, the headline where it exists; a metric that "
        "prefers one explanation's text wins one direction and loses the other, so its D_sym sits near 0.5. n/a: "
        "roles not swapped (Analogy, whose cityOf explanation holds in both models, or a run with `--no-swap`).",
        STATISTICS_FOOTNOTE,
    ]


def _reliability_section(doc: Mapping[str, Any]) -> list[str]:
    """Edit reliability (§5.3) one-sided, two-sided and with no edits in context."""
    lines = [
        "| task | edit reliability | 95% CI | two-sided | 95% CI | no edits | 95% CI | n |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {e['task']} | {format_number(e['value'])} | {_interval(e)} | {format_number(e.get('two_sided'))} | "
        f"{_interval_of(e, 'two_sided')} | {format_number(e.get('no_edit'))} | {_interval_of(e, 'no_edit')} | "
        f"{e['n']} |"
        for e in doc["edit_reliability"]
    ]
    return lines + [
        "",
        "Edit reliability: share of pairs whose faithful explanation has the lower perplexity under the edits. "
        "Two-sided: besides, the unfaithful one has the lower perplexity under the counter edits (n/a where the "
        "roles cannot be swapped). No edits: the faithful one has the lower perplexity with no edit in context, "
        "what the text alone prefers; near 0.5 when the preference comes from the edits (the control on Analogy).",
    ]


def _accuracy_section(doc: Mapping[str, Any]) -> list[str]:
    """Task accuracy of the edited model, direct and CoT (absent from results files before schema 1.2)."""
    entries = doc.get("accuracy")
    if not entries:
        return []
    lines = ["| task | accuracy direct | 95% CI | accuracy CoT | 95% CI | n |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {a['task']} | {format_number(a['direct'])} | {_interval_of(a, 'direct')} | {format_number(a['cot'])} | "
        f"{_interval_of(a, 'cot')} | {a['direct_n']} |"
        for a in entries
    ]
    return lines + [
        "",
        "Accuracy: share of pairs where the evaluated (edited) model's answer is the pair's `answer`, after the "
        "direct prompt and after the CoT prompt holding the faithful explanation.",
    ]


def _edit_quality_section(doc: Mapping[str, Any]) -> list[str]:
    """How well a weight editor wrote each task's edits (absent under ICE and before schema 1.3)."""
    entries = doc.get("edit_quality")
    if not entries:
        return []
    figures = ("efficacy", "counter_efficacy", "generalisation", "counter_generalisation", "specificity")
    lines = [
        "",
        "| task | editor | " + " | ".join(f"{f.replace('_', ' ')} | 95% CI" for f in figures) + " | failed / n | "
        "failed left out |",
        "|---|---|" + "---|---|" * len(figures) + "---|---|",
    ]
    lines += [
        f"| {q['task']} | {q['editor']} | "
        + "".join(f"{format_number(q.get(f))} | {_interval_of(q, f)} | " for f in figures)
        + f"{q['n_failed']} / {q['n']} | {'yes' if q['failed_excluded'] else 'no'} |"
        for q in entries
    ]
    return lines + [
        "",
        "Edit quality: efficacy is the share of a pair's rewrites (M̄'s edits; counter: M̃'s) whose new object "
        "became the top next token of the rewrite prompt; generalisation the same on the rewrites' paraphrased "
        "prompts; specificity the share of up to four other subjects' rewrite prompts whose top next token the edit "
        "left unchanged. A pair fails when any rewrite of either side did not take (efficacy); with "
        "`--drop-failed-edits` such pairs are left out of the figures above.",
    ]


def _generation_section(doc: Mapping[str, Any]) -> list[str]:
    """How many pairs kept their generated explanations (absent with synthetic explanations)."""
    entries = doc.get("generated_explanations")
    if not entries:
        return []
    counts = "; ".join(
        f"{g['task']}: {g['n_kept']} of {g['n']} pairs kept ({g['n_different_answers']} where the edited models "
        f"answered differently, {g['n_unusable']} with an empty or repeated generation)"
        for g in entries
    )
    return ["", f"Generated explanations (§5.5): {counts}."]


def headline(entry: Mapping[str, Any]) -> tuple[str, float | None, float | None, float | None, float | None]:
    """(name, value, CI low, CI high, adjusted p) of a result's headline diagnosticity: D_sym where the roles were
    swapped, else D."""
    value = entry.get("d_sym")
    if value is not None and not math.isnan(value):
        return "D_sym", value, entry["d_sym_ci_low"], entry["d_sym_ci_high"], entry.get("d_sym_p_adjusted")
    return "D", entry["diagnosticity"], entry["ci_low"], entry["ci_high"], entry.get("p_adjusted")


def _plot_label(entry: Mapping[str, Any]) -> str:
    """'task · metric · variant · D_sym ▲ · coverage 0.95': the headline figure's name, its direction marker where
    it is significant, the coverage "n/a" where the entry does not record it."""
    name, value, _, _, p_adjusted = headline(entry)
    marker = direction_marker(value, p_adjusted)
    return (
        f"{entry['task']} · {entry['metric']} · {entry['variant']} · {name}{' ' + marker if marker else ''} · "
        f"coverage {format_number(entry.get('coverage'), '.2f')}"
    )


def _bars(doc: Mapping[str, Any]) -> list[tuple[str, str, float, float, float]]:
    """(label, colour group, value, CI low, CI high) of every headline diagnosticity and edit reliability with a
    value."""
    bars = [(_plot_label(r), r["metric"], *headline(r)[1:4]) for r in doc["results"]]
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
    """Horizontal bars with 95% CIs: the headline diagnosticity per metric variant (D_sym where the roles were
    swapped, else D; labelled with its direction marker and coverage) and edit reliability per task; the dashed line
    is chance (0.5)."""
    bars = _bars(doc)
    palette: dict[str, str] = {}
    for _, group, *_ in bars:
        palette.setdefault(group, f"C{len(palette)}")
    model = doc["model"]["name"]
    title = f"{model} · {doc['editor']} · {doc['explanations']} explanations"
    fig = ci_bar_chart(
        [(label, value, low, high) for label, _, value, low, high in bars],
        [palette[group] for _, group, *_ in bars],
        f"diagnosticity D_sym (D where not swapped) / edit reliability (95% CI)\n"
        f"dashed: chance; {ABOVE} / {BELOW}: above / below 0.5 (Holm)",
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

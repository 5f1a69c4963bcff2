"""The causal-diagnosticity leaderboard Space: a thin Gradio layer over `recoe_causaldiag.leaderboard`."""

from __future__ import annotations

import functools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import gradio as gr
import pandas as pd

from recoe_causaldiag.api.run_spec import EDITORS, EXPLANATION_SOURCES, PRECISIONS
from recoe_causaldiag.citation import BIBTEX
from recoe_causaldiag.leaderboard.queue import STATUSES
from recoe_causaldiag.leaderboard.render import (
    ALL,
    BOARD_COLUMNS,
    BOARD_LEGEND,
    CELL_KEY,
    DEFAULT_COLUMNS,
    MODEL_SIZES,
    QUEUE_HEADERS,
    UNKNOWN_SIZE,
    BoardFilter,
    board_frame,
    board_plot,
    board_records,
    column_types,
    inert,
    pairs_frame,
    queue_summary,
    queue_table,
    write_downloads,
)
from recoe_causaldiag.leaderboard.schema import QueueUnavailable
from recoe_causaldiag.leaderboard.service import Leaderboard
from recoe_causaldiag.leaderboard.settings import SEED_RESULTS_ENV, LeaderboardSettings
from recoe_causaldiag.metrics import METRICS
from recoe_causaldiag.models import DEFAULT_MODEL
from recoe_causaldiag.tasks import TASKS

ABOUT = (Path(__file__).parent / "about.md").read_text(encoding="utf-8")
SEED = Path(__file__).parent / "seed"
"""The reference results an empty board starts from, unless `CAUSALDIAG_SEED_RESULTS` says otherwise ('' for none)."""
ALL_STATUSES = "all"
P = ParamSpec("P")
R = TypeVar("R")


def unavailable_as_error(read: Callable[P, R]) -> Callable[P, R]:
    """`read`, with a QueueUnavailable (the queue's database busy or removed) or a refused query (a ValueError: an
    unknown status filter) raised as a gr.Error: the page shows its message, which never echoes the query, instead
    of a traceback."""

    @functools.wraps(read)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return read(*args, **kwargs)
        except (QueueUnavailable, ValueError) as err:
            raise gr.Error(str(err)) from None

    return guarded


def build(leaderboard: Leaderboard) -> gr.Blocks:
    def submitter_of(request: gr.Request | None) -> str:
        """The logged-in Hub user, else a keyed pseudonym of the client address (what the rate limit and the queue
        filter use; the address itself is never stored or shown)."""
        if request is None:
            return ""
        if getattr(request, "username", None):
            return str(request.username)
        return leaderboard.pseudonym(request.client.host) if request.client else ""

    downloads = Path(os.environ.get("GRADIO_TEMP_DIR") or tempfile.gettempdir()) / "causaldiag-downloads"

    @unavailable_as_error
    def show_board(
        search: str,
        task: str,
        editor: str,
        explanations: str,
        precision: str,
        size: str,
        columns: list[str] | None,
    ) -> tuple[gr.Dataframe, object, list[dict], list[str]]:
        """The Leaderboard tab for a filter: its typed table (the chosen columns), plot, records (for the
        drill-down) and the shown board as CSV and parquet."""
        filters = BoardFilter(
            search or "", task or ALL, editor or ALL, explanations or ALL, precision or ALL, size or ALL
        )
        records = board_records(leaderboard.board(), filters)
        chosen = [c for c in BOARD_COLUMNS if c == "#" or c in (columns or DEFAULT_COLUMNS)]
        frame = board_frame(records, chosen, digits=3, links=True)
        everything = board_frame(records, list(BOARD_COLUMNS))
        files = [str(f) for f in write_downloads(everything, downloads, "leaderboard")]
        return gr.Dataframe(value=frame, datatype=column_types(chosen)), board_plot(records), records, files

    @unavailable_as_error
    def board_api(search: str, task: str) -> pd.DataFrame:
        """The `/leaderboard` API: the board of a search and a task, every column, numbers as numbers."""
        filters = BoardFilter(search or "", task or ALL)
        return board_frame(board_records(leaderboard.board(), filters), list(BOARD_COLUMNS))

    @unavailable_as_error
    def drill_down(records: list[dict], event: gr.SelectData) -> tuple[str, pd.DataFrame, list[str]]:
        """The per-pair scores behind the clicked board row (found by its rank among this page's own records),
        with their CSV and parquet."""
        try:
            rank = int(event.row_value[0])
        except (TypeError, ValueError, IndexError):
            rank = 0
        record = next((r for r in records if r["#"] == rank), None)
        if record is None or record[CELL_KEY] is None:
            return "This row has no stored per-pair scores to show.", pd.DataFrame(), []
        configuration, cell_task, metric, variant = record[CELL_KEY]
        scores = leaderboard.cell_scores(tuple(configuration), cell_task, metric, variant)
        frame = pairs_frame(scores)
        title = (
            f"**#{rank}** · {inert(record['model'])} · {inert(record['metric'])} · {inert(record['variant'])} · "
            f"{inert(cell_task)}: {len(frame)} pairs from job #{scores[0].job_id if scores else '?'}"
        )
        return title, frame, [str(f) for f in write_downloads(frame, downloads, f"pairs-{rank}")]

    @unavailable_as_error
    def show_queue(submitter: str | None, status: str | None, page: int | None) -> tuple[pd.DataFrame, str, int]:
        """One page of the Queue tab: its table, its 'page P of N' line and its page number (kept within the
        pages there are)."""
        # None: the Queue tab is not rendered yet (the browser sends no value for a tab never opened)
        submitter = (submitter or "").strip()
        status = None if status in (None, "", ALL_STATUSES) else status
        shown = leaderboard.queue.jobs_page(submitter=submitter or None, status=status, page=int(page or 1))
        table = pd.DataFrame(queue_table(shown.jobs), columns=QUEUE_HEADERS)
        return table, queue_summary(shown, submitter, status), shown.page

    def queue_status(submitter: str, status: str, page: int) -> pd.DataFrame:
        """The `/queue_status` API: the table of one page of the jobs, newest first."""
        return show_queue(submitter, status, page)[0]

    def turn_page(step: int) -> Callable[[str | None, str | None, int | None], tuple[pd.DataFrame, str, int]]:
        """What the Previous (-1) or Next (+1) button shows: the page `step` pages away from the current one."""
        return lambda submitter, status, page: show_queue(submitter, status, int(page or 1) + step)

    def review_metric(job_id: float | None, token: str, request: gr.Request) -> str:
        return leaderboard.review_metric(int(job_id or 0), token, submitter_of(request))

    def approve_metric(job_id: float | None, token: str, sha256: str, request: gr.Request) -> str:
        return leaderboard.approve_metric(int(job_id or 0), token, sha256, submitter_of(request))

    def submit_model(
        model: str,
        revision: str,
        precision: str,
        tasks: list[str],
        metrics: list[str],
        editor: str,
        request: gr.Request,
    ) -> str:
        return leaderboard.submit_model(model, revision, precision, tasks, metrics, submitter_of(request), editor)

    def submit_metric(
        name: str, hub_id: str, files: list[str] | None, model: str, tasks: list[str], request: gr.Request
    ) -> str:
        return leaderboard.submit_metric(
            name, hub_id, [Path(f) for f in files or []], model, tasks, submitter_of(request)
        )

    with gr.Blocks(title="Causal diagnosticity leaderboard") as app:
        gr.Markdown(
            "# Causal diagnosticity leaderboard\nHow often does a faithfulness metric prefer the faithful "
            "explanation? Explanations are made faithful by construction with knowledge editing."
        )
        with gr.Tab("Leaderboard", elem_id="tab-leaderboard"):
            with gr.Row():
                search = gr.Textbox(label="Search model or metric", scale=3, elem_id="board-search")
                task = gr.Dropdown([ALL, *TASKS.names()], value=ALL, label="Task", scale=1, elem_id="board-task")
                refresh = gr.Button("Refresh", scale=0, elem_id="board-refresh")
            with gr.Row():
                editor_filter = gr.Dropdown([ALL, *EDITORS], value=ALL, label="Editor", elem_id="board-editor")
                explanations_filter = gr.Dropdown(
                    [ALL, *EXPLANATION_SOURCES], value=ALL, label="Explanations", elem_id="board-explanations"
                )
                precision_filter = gr.Dropdown(
                    [ALL, *PRECISIONS], value=ALL, label="Precision", elem_id="board-precision"
                )
                size_filter = gr.Dropdown(
                    [ALL, *MODEL_SIZES, UNKNOWN_SIZE], value=ALL, label="Model size", elem_id="board-size"
                )
            columns = gr.CheckboxGroup(
                [c for c in BOARD_COLUMNS if c != "#"],
                value=list(DEFAULT_COLUMNS),
                label="Columns",
                elem_id="board-columns",
            )
            table = gr.Dataframe(
                label=BOARD_LEGEND,
                interactive=False,
                wrap=True,
                datatype=column_types(["#", *DEFAULT_COLUMNS]),
                elem_id="board-table",
            )
            board_files = gr.File(label="Download the shown board", file_count="multiple", elem_id="board-download")
            plot = gr.Plot(label="D with 95% CI (dashed: chance)", elem_id="board-plot")
            records = gr.State([])
            with gr.Accordion("Per-pair scores of the clicked row", open=True, elem_id="board-drilldown"):
                drill_title = gr.Markdown("Click a row of the board.", elem_id="drill-title")
                drill_table = gr.Dataframe(interactive=False, elem_id="drill-table")
                drill_files = gr.File(label="Download (CSV, parquet)", file_count="multiple", elem_id="drill-download")
            with gr.Accordion("Cite", open=False, elem_id="board-cite"):
                gr.Code(BIBTEX, language=None, label="BibTeX", elem_id="board-bibtex")
            filters = [search, task, editor_filter, explanations_filter, precision_filter, size_filter, columns]
            shown_board = [table, plot, records, board_files]
            triggers = (refresh.click, search.submit, task.change, columns.change)
            chosen = (editor_filter, explanations_filter, precision_filter, size_filter)
            for trigger in (*triggers, *(dropdown.change for dropdown in chosen)):
                trigger(show_board, filters, shown_board, api_name=False)
            table.select(drill_down, [records], [drill_title, drill_table, drill_files], api_name=False)
        with gr.Tab("Submit", elem_id="tab-submit"):
            model = gr.Textbox(
                label="Model (Hub id, packaged name or local folder)", value=DEFAULT_MODEL, elem_id="submit-model"
            )
            revision = gr.Textbox(label="Revision", value="main", elem_id="submit-revision")
            precision = gr.Dropdown(list(PRECISIONS), value="auto", label="Precision", elem_id="submit-precision")
            tasks = gr.CheckboxGroup(TASKS.names(), value=["factcheck"], label="Tasks", elem_id="submit-tasks")
            metrics = gr.CheckboxGroup(
                METRICS.names(), value=["filler_tokens"], label="Metrics", elem_id="submit-metrics"
            )
            editor = gr.Dropdown(
                list(EDITORS),
                value="ice",
                label="Editor (ice: edits in context; rome, memit: edits written into the weights)",
                elem_id="submit-editor",
            )
            submit = gr.Button("Submit model", variant="primary", elem_id="submit-button")
            answer = gr.Markdown(elem_id="submit-answer")
            submit.click(
                submit_model, [model, revision, precision, tasks, metrics, editor], answer, api_name="submit_model"
            )
        with gr.Tab("Submit a metric"):
            gr.Markdown(
                "An `evaluate` module (`<name>/<name>.py` whose `compute(question, choices, edits, "
                "explanations, model)` returns `scores`: one finite number, or None where it declines, per "
                "explanation; and optionally `variant`: 1-64 letters, digits, `_`, `.`, `-` or spaces), by Hub id "
                "or as an uploaded folder. It runs only after an admin approves it, in a separate process with a "
                "time limit."
            )
            metric_name = gr.Textbox(label="Metric name")
            metric_hub = gr.Textbox(label="Hub id (org/name)")
            metric_files = gr.File(label="or the module folder", file_count="directory")
            metric_model = gr.Textbox(label="Model", value=DEFAULT_MODEL)
            metric_tasks = gr.CheckboxGroup(TASKS.names(), value=["factcheck"], label="Tasks")
            metric_submit = gr.Button("Submit metric")
            metric_answer = gr.Markdown()
            metric_submit.click(
                submit_metric,
                [metric_name, metric_hub, metric_files, metric_model, metric_tasks],
                metric_answer,
                api_name="submit_metric",
            )
            with gr.Accordion("Admin: review and approve a submitted metric", open=False):
                with gr.Row():
                    job_id = gr.Number(label="Job", precision=0, elem_id="admin-job")
                    token = gr.Textbox(label="Admin token", type="password", elem_id="admin-token")
                review = gr.Button("Review the module", elem_id="admin-review")
                source = gr.Code(label="Module source and sha256", interactive=False, elem_id="admin-source")
                sha256 = gr.Textbox(label="sha256 of the reviewed module", elem_id="admin-sha256")
                approve = gr.Button("Approve exactly this module", elem_id="admin-approve")
                approved = gr.Markdown(elem_id="admin-answer")
                review.click(review_metric, [job_id, token], source, api_name=False)
                approve.click(approve_metric, [job_id, token, sha256], approved, api_name=False)
        with gr.Tab("Queue", elem_id="tab-queue"):
            gr.Markdown(leaderboard.containment_status(), elem_id="queue-containment")
            with gr.Row():
                submitter = gr.Textbox(label="Submitter (empty: everyone)", scale=3, elem_id="queue-submitter")
                status = gr.Dropdown(
                    [ALL_STATUSES, *STATUSES], value=ALL_STATUSES, label="Status", scale=1, elem_id="queue-status"
                )
                queue_refresh = gr.Button("Refresh queue", scale=0, elem_id="queue-refresh")
            with gr.Row():
                previous_page = gr.Button("Previous", scale=0, elem_id="queue-previous")
                page = gr.Number(1, label="Page", precision=0, scale=0, elem_id="queue-page")
                next_page = gr.Button("Next", scale=0, elem_id="queue-next")
                summary = gr.Markdown(elem_id="queue-summary")
            queue = gr.Dataframe(label="Jobs (newest first)", interactive=False, wrap=True, elem_id="queue-table")
            shown_page = [queue, summary, page]
            for trigger in (queue_refresh.click, page.submit, gr.Timer(10).tick):
                trigger(show_queue, [submitter, status, page], shown_page, api_name=False)
            for trigger in (submitter.submit, status.change):
                trigger(lambda who, what: show_queue(who, what, 1), [submitter, status], shown_page, api_name=False)
            previous_page.click(turn_page(-1), [submitter, status, page], shown_page, api_name=False)
            next_page.click(turn_page(1), [submitter, status, page], shown_page, api_name=False)
            queue_api = gr.Button(visible=False, elem_id="queue-api")
            queue_api.click(queue_status, [submitter, status, page], queue, api_name="queue_status")
        with gr.Tab("About"):
            gr.Markdown(ABOUT)
        leaderboard_api = gr.Button(visible=False)
        leaderboard_api.click(board_api, [search, task], table, api_name="leaderboard")
        app.load(show_board, filters, shown_board, api_name=False)
        app.load(show_queue, [submitter, status, page], shown_page, api_name=False)
    return app


def main() -> None:
    os.environ.setdefault(SEED_RESULTS_ENV, str(SEED))
    settings = LeaderboardSettings.from_env()
    os.environ["FORWARDED_ALLOW_IPS"] = ",".join(settings.trusted_proxies)  # uvicorn trusts 127.0.0.1 by default
    leaderboard = Leaderboard(settings)
    leaderboard.start_worker()
    build(leaderboard).queue().launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"), server_port=int(os.environ.get("PORT", "7860"))
    )


if __name__ == "__main__":
    main()

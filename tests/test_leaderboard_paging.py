"""The Queue tab pages: a queue of thousands of jobs, each with a full log tail, is read one page at a time (newest
first, filtered by submitter and status), and what one refresh sends is kilobytes, not the whole queue."""

from __future__ import annotations

import importlib.util
from datetime import datetime, timedelta
from pathlib import Path

import gradio as gr
import pandas as pd
import pytest
from sqlalchemy import insert

from recoe_causaldiag.leaderboard.queue import (
    FAILED,
    LOG_TAIL_CHARS,
    MAX_QUEUE_PAGE_SIZE,
    QUEUE_PAGE_SIZE,
    STATUSES,
    JobQueue,
)
from recoe_causaldiag.leaderboard.render import QUEUE_HEADERS, queue_summary, queue_table
from recoe_causaldiag.leaderboard.schema import jobs
from recoe_causaldiag.leaderboard.service import Leaderboard
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings

ROOT = Path(__file__).resolve().parents[1]
N_JOBS = 5000
SUBMITTERS = ("alice", "bob", "carol", "dave")
START = datetime(2025, 1, 1)


def stored_job(i: int) -> dict[str, object]:
    """Job i of the filled queue: submitters and statuses in turn, and a log tail as long as the queue keeps."""
    return {
        "kind": "model",
        "model": f"org/model-{i}",
        "revision": "main",
        "precision": "auto",
        "editor": "ice",
        "explanations": "synthetic",
        "tasks": "factcheck",
        "metrics": "filler_tokens",
        "submitter": SUBMITTERS[i % len(SUBMITTERS)],
        "request_key": f"{i:064x}",
        "status": STATUSES[i % len(STATUSES)],
        "reason": "",
        "log_tail": f"job {i} " + "x" * LOG_TAIL_CHARS,
        "attempts": 0,
        "created_at": START + timedelta(minutes=i),
    }


@pytest.fixture(scope="module")
def db_url(tmp_path_factory) -> str:
    """A queue database holding N_JOBS jobs, inserted in one transaction."""
    url = f"sqlite:///{tmp_path_factory.mktemp('paging') / 'queue.sqlite'}"
    with JobQueue.open(url).engine.begin() as conn:
        conn.execute(insert(jobs), [stored_job(i) for i in range(N_JOBS)])
    return url


@pytest.fixture(scope="module")
def queue(db_url) -> JobQueue:
    return JobQueue.open(db_url)


def ids(page) -> list[int]:
    return [job.id for job in page.jobs]


def test_a_page_holds_page_size_jobs_newest_first(queue):
    first = queue.jobs_page()
    assert (first.page, first.page_size, first.total) == (1, QUEUE_PAGE_SIZE, N_JOBS)
    assert first.pages == N_JOBS // QUEUE_PAGE_SIZE
    assert ids(first) == list(range(N_JOBS, N_JOBS - QUEUE_PAGE_SIZE, -1))
    second = queue.jobs_page(page=2, page_size=10)
    assert ids(second) == list(range(N_JOBS - 10, N_JOBS - 20, -1))
    assert ids(queue.jobs_page(page=3, page_size=7))[0] == N_JOBS - 14


def test_filters_by_submitter_and_status(queue):
    bob = queue.jobs_page(submitter="bob", page_size=50)
    assert bob.total == N_JOBS // len(SUBMITTERS) and {j.submitter for j in bob.jobs} == {"bob"}
    failed = queue.jobs_page(status=FAILED, page=2)
    assert failed.total == N_JOBS // len(STATUSES) and {j.status for j in failed.jobs} == {FAILED}
    assert ids(failed) == sorted(ids(failed), reverse=True) and len(failed.jobs) == QUEUE_PAGE_SIZE
    both = queue.jobs_page(submitter="alice", status=STATUSES[0], page_size=MAX_QUEUE_PAGE_SIZE)
    assert both.total == N_JOBS // (len(SUBMITTERS) * len(STATUSES)) == 250 and both.pages == 2
    assert {(j.submitter, j.status) for j in both.jobs} == {("alice", STATUSES[0])}
    nobody = queue.jobs_page(submitter="nobody")
    assert (nobody.jobs, nobody.page, nobody.pages, nobody.total) == ([], 1, 1, 0)
    with pytest.raises(ValueError, match="unknown job status"):
        queue.jobs_page(status="DONE")


def test_pages_outside_the_range_clamp(queue):
    last = queue.jobs_page(submitter="carol", page_size=300)
    assert last.page_size == MAX_QUEUE_PAGE_SIZE and last.pages == 7
    past = queue.jobs_page(submitter="carol", page=99, page_size=MAX_QUEUE_PAGE_SIZE)
    assert past.page == 7 and len(past.jobs) == N_JOBS // len(SUBMITTERS) - 6 * MAX_QUEUE_PAGE_SIZE
    assert ids(queue.jobs_page(page=0)) == ids(queue.jobs_page(page=-5)) == ids(queue.jobs_page())
    assert queue.jobs_page(page_size=0).page_size == 1


def test_the_page_summary_says_where_the_page_is_with_user_text_inert(queue):
    assert queue_summary(queue.jobs_page(page=3)) == "page 3 of 200 · 5,000 jobs"
    filtered = queue.jobs_page(submitter="bob", status=FAILED)
    assert queue_summary(filtered, "bob", FAILED) == "page 1 of 10 · 250 jobs · submitter bob · status FAILED"
    assert queue_summary(queue.jobs_page(submitter="<b>[x](y)"), "<b>[x](y)") == (
        r"page 1 of 1 · 0 jobs · submitter &lt;b&gt;\[x\]\(y\)"
    )


def space(leaderboard: Leaderboard) -> gr.Blocks:
    """The Space's app as `make space` builds it."""
    spec = importlib.util.spec_from_file_location("leaderboard_space_app", ROOT / "leaderboard_space" / "app.py")
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    return app.build(leaderboard)


def event(app: gr.Blocks, elem_id: str, name: str):
    """The function that the event `name` of the component with `elem_id` runs."""
    component = next(b for b in app.blocks.values() if getattr(b, "elem_id", None) == elem_id)
    return next(f for f in app.fns.values() if (component._id, name) in f.targets)


@pytest.fixture(scope="module")
def app(db_url) -> gr.Blocks:
    return space(Leaderboard(LeaderboardSettings(db_url=db_url)))


def sent(component, table: pd.DataFrame) -> int:
    """The bytes of the JSON that Gradio sends for `table` in `component`."""
    return len(component.postprocess(table).model_dump_json().encode())


def test_one_refresh_sends_kilobytes_whatever_the_queue_holds(app, queue):
    api = next(f for f in app.fns.values() if f.api_name == "queue_status")
    assert [c.elem_id for c in api.inputs] == ["queue-submitter", "queue-status", "queue-page"]
    table = api.fn("", "all", 1)
    assert list(table["job"]) == list(range(N_JOBS, N_JOBS - QUEUE_PAGE_SIZE, -1))
    assert table["log tail"].str.len().max() < LOG_TAIL_CHARS // 4
    everything = pd.DataFrame(queue_table(queue.jobs()), columns=QUEUE_HEADERS)
    one_page, all_jobs = sent(api.outputs[0], table), sent(api.outputs[0], everything)
    assert one_page < 64 * 1024 and all_jobs > 100 * one_page, (one_page, all_jobs)
    tick = next(f for f in app.fns.values() if any(name == "tick" for _, name in f.targets))
    shown, summary, page = tick.fn("bob", FAILED, 4)
    assert page == 4 and summary.startswith("page 4 of 10 · 250 jobs") and len(shown) == QUEUE_PAGE_SIZE
    assert set(shown["submitter"]) == {"bob"} and set(shown["status"]) == {FAILED}


def test_the_queue_tab_turns_pages_and_resets_to_the_first_on_a_new_filter(app):
    forward = event(app, "queue-next", "click").fn("", "all", 199)
    assert forward[2] == 200 and list(forward[0]["job"])[-1] == 1, "the last page"
    assert event(app, "queue-next", "click").fn("", "all", 200)[2] == 200
    back = event(app, "queue-previous", "click").fn("", "all", 1)
    assert back[2] == 1 and back[0]["job"][0] == N_JOBS
    table, summary, page = event(app, "queue-status", "change").fn("alice", "RUNNING")
    assert page == 1 and set(table["status"]) == {"RUNNING"} and "submitter alice · status RUNNING" in summary
    assert event(app, "queue-page", "submit").fn(None, None, None)[2] == 1, "a tab never opened sends no values"


def test_an_unavailable_queue_is_an_error_message_not_a_traceback(tmp_path):
    database = tmp_path / "queue.sqlite"
    app = space(Leaderboard(LeaderboardSettings(db_url=f"sqlite:///{database}")))
    for suffix in ("", "-wal", "-shm"):
        database.with_name(database.name + suffix).unlink(missing_ok=True)
    board_api = next(f for f in app.fns.values() if f.api_name == "leaderboard")
    for read, inputs in ((event(app, "queue-refresh", "click"), ("", "all", 1)), (board_api, ("", "all"))):
        with pytest.raises(gr.Error, match="removed"):
            read.fn(*inputs)

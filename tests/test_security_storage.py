"""The storage faults of the security campaign (the fast checks are in test_leaderboard_storage.py): a queue file
removed or replaced while the app runs, a lock held from outside, and a corrupted model cache. A fault answered
loudly (QueueUnavailable, QueueBusy within the read timeout, a failed sha256 check) is "rejected" with that answer;
a write that succeeds into a removed or replaced file is "lost"; a read answered from one is "accepted wrongly"."""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from fakes import flip_a_byte
from security_campaign import ACCEPTED, ACCEPTED_WRONGLY, CRASHED, LOST, REJECTED, CampaignRecorder
from test_leaderboard_queue import rows
from test_leaderboard_storage import REQUEST

from recoe_causaldiag.leaderboard.queue import JobQueue
from recoe_causaldiag.leaderboard.schema import QueueBusy, QueueUnavailable
from recoe_causaldiag.leaderboard.service import Leaderboard
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.models import DEFAULT_MODEL, packaged_model_dir, verify_packaged_model
from recoe_causaldiag.paths import CACHE_ENV

pytestmark = pytest.mark.security

CAMPAIGN = "storage faults"
READ_TIMEOUT_S = 0.5


def answer_to(
    action: Callable[[], object], refusal: type[Exception], if_answered: tuple[str, str], within_s: float = 10
) -> tuple[str, str]:
    """(outcome, reason) of `action` under a fault: REJECTED with the message when it raises `refusal` within
    `within_s`, `if_answered` when it returns, CRASHED on any other exception or a late answer."""
    started = time.monotonic()
    try:
        action()
        outcome, reason = if_answered
    except refusal as err:
        outcome, reason = REJECTED, str(err)
    except Exception as err:  # what the campaign looks for: an error that is not the loud refusal
        outcome, reason = CRASHED, f"{type(err).__name__}: {err}"
    took = time.monotonic() - started
    return (outcome, reason) if took <= within_s else (CRASHED, f"answered after {took:.1f} s: {reason}")


def remove(database: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        database.with_name(database.name + suffix).unlink(missing_ok=True)


def replace_with_a_new_queue(database: Path) -> None:
    other = database.with_name("other.sqlite")
    JobQueue.open(f"sqlite:///{other}").engine.dispose()
    shutil.move(other, database)


@contextmanager
def locked_from_outside(database: Path) -> Iterator[None]:
    """An exclusive lock on the queue's file, held by another connection for the block."""
    outside = sqlite3.connect(database, isolation_level=None)
    outside.execute("PRAGMA locking_mode=EXCLUSIVE")
    outside.execute("BEGIN EXCLUSIVE")
    outside.execute("UPDATE jobs SET reason = 'held'")
    try:
        yield
    finally:
        outside.execute("ROLLBACK")
        outside.close()


def record(campaign: CampaignRecorder, case: str, answer: tuple[str, str]) -> None:
    campaign.record(CAMPAIGN, case, *answer)


@pytest.mark.parametrize("kind, fault", [("removed", remove), ("replaced", replace_with_a_new_queue)])
def test_a_queue_file_removed_or_replaced_takes_no_work(tmp_path, campaign, kind, fault):
    """Every read and write of the queue is refused, a worker's task of a job it claimed before included."""
    database = tmp_path / "queue.sqlite"
    queue = JobQueue.open(f"sqlite:///{database}")
    claimed = queue.submit(REQUEST, "alice", pair_cap=2).job
    queue.claim("w")
    fault(database)
    cases = {
        "a submission": (lambda: queue.submit(REQUEST, "bob", pair_cap=2), (LOST, "accepted into a dead file")),
        "a claim": (lambda: queue.claim("w2"), (LOST, "claimed from a dead file")),
        "a worker's stored task": (
            lambda: queue.record_task(claimed.id, "w", "factcheck", "1.0.0", 1.0, rows("factcheck")),
            (LOST, "stored into a dead file"),
        ),
        "a read of the jobs": (queue.jobs, (ACCEPTED_WRONGLY, "answered from a dead file")),
        "a read of the scores": (queue.stored_scores, (ACCEPTED_WRONGLY, "answered from a dead file")),
    }
    for case, (action, if_answered) in cases.items():
        record(campaign, f"{kind} file: {case}", answer_to(action, QueueUnavailable, if_answered))
    assert not campaign.failures(), campaign.failures()


def test_the_space_refuses_a_submission_to_a_removed_queue_file(tmp_path, campaign):
    database = tmp_path / "queue.sqlite"
    leaderboard = Leaderboard(LeaderboardSettings(db_url=f"sqlite:///{database}", local_model_roots=(tmp_path,)))
    remove(database)
    answer = leaderboard.submit_model(DEFAULT_MODEL, "main", "auto", ["factcheck"], ["random_baseline"], "alice")
    refused = answer.startswith("Rejected") and "removed" in answer
    record(campaign, "removed file: the Space's answer", (REJECTED, answer) if refused else (LOST, answer))
    assert not campaign.failures(), campaign.failures()


def test_a_lock_held_from_outside_is_busy_within_the_read_timeout_and_loses_nothing(tmp_path, campaign):
    database = tmp_path / "queue.sqlite"
    queue = JobQueue.open(f"sqlite:///{database}", read_timeout_s=READ_TIMEOUT_S)
    queue.submit(REQUEST, "alice", pair_cap=2)
    queue.engine.dispose()  # an exclusive lock needs every other connection closed
    with locked_from_outside(database):
        for case, action in (("a read of the jobs", queue.jobs), ("a read of the scores", queue.stored_scores)):
            answer = answer_to(action, QueueBusy, (ACCEPTED_WRONGLY, "read through a lock"), within_s=5)
            record(campaign, f"outside lock: {case}", answer)
    kept = [job.submitter for job in queue.jobs()] == ["alice"]
    after = (ACCEPTED, "the job is kept") if kept else (LOST, "the job is gone")
    record(campaign, "outside lock: the queue once it is released", after)
    assert not campaign.failures(), campaign.failures()


def test_a_corrupted_model_cache_fails_its_check_and_is_rebuilt(tmp_path, monkeypatch, campaign):
    """A same-size corruption of a packaged model's converted weights (a copy, in a cache of its own) is caught by
    the sha256 check a worker runs before each task, and the cache is rebuilt whole."""
    cached = tmp_path / "cache" / "models" / DEFAULT_MODEL
    shutil.copytree(packaged_model_dir(DEFAULT_MODEL), cached)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    weights = cached / "model.safetensors"
    flip_a_byte(weights)
    caught = not verify_packaged_model(DEFAULT_MODEL)
    if not caught:
        answer = ACCEPTED_WRONGLY, "a corrupted cache passed its sha256 check"
    elif not verify_packaged_model(DEFAULT_MODEL):
        answer = CRASHED, "the rebuilt cache fails its sha256 check"
    else:
        answer = REJECTED, "failed its sha256 check and was rebuilt"
    record(campaign, "corrupted model cache", answer)
    assert not campaign.failures(), campaign.failures()

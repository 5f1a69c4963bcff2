"""Storage faults are loud: a removed or replaced queue file stops the queue with a clear reason (never a write into
a deleted file), and a lock held from outside makes a read answer "queue busy" within the read timeout."""

from __future__ import annotations

import shutil
import sqlite3
import time

import pytest

from recoe_causaldiag.leaderboard.queue import MODEL_JOB, JobQueue, JobRequest
from recoe_causaldiag.leaderboard.schema import QueueBusy, QueueUnavailable
from recoe_causaldiag.leaderboard.service import Leaderboard
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings

REQUEST = JobRequest(
    MODEL_JOB, "smollm2-135m-instruct", "main", "auto", "ice", "synthetic", ("factcheck",), ("random_baseline",)
)


@pytest.fixture()
def database(tmp_path):
    return tmp_path / "queue.sqlite"


def test_a_removed_queue_file_stops_every_read_and_write(database):
    queue = JobQueue.open(f"sqlite:///{database}")
    queue.submit(REQUEST, "alice", pair_cap=2)
    for suffix in ("", "-wal", "-shm"):
        database.with_name(database.name + suffix).unlink(missing_ok=True)
    with pytest.raises(QueueUnavailable, match="removed"):
        queue.submit(REQUEST, "bob", pair_cap=2)
    with pytest.raises(QueueUnavailable, match="removed"):
        queue.jobs()
    with pytest.raises(QueueUnavailable, match="removed"):
        queue.claim("w")
    assert not database.exists()


def test_a_replaced_queue_file_is_never_written(database, tmp_path):
    queue = JobQueue.open(f"sqlite:///{database}")
    queue.submit(REQUEST, "alice", pair_cap=2)
    other = tmp_path / "other.sqlite"
    JobQueue.open(f"sqlite:///{other}").engine.dispose()  # a complete file, its write-ahead log checkpointed
    shutil.move(other, database)
    before = _files_of(database)
    with pytest.raises(QueueUnavailable, match="replaced"):
        queue.submit(REQUEST, "bob", pair_cap=2)
    assert _files_of(database) == before


def _files_of(database):
    """The bytes of a SQLite database's file and its write-ahead log, by name (an absent log left out): comparing
    them is exact where reading the jobs back would apply whatever log lies beside the file."""
    paths = (database, database.with_name(database.name + "-wal"))
    return {path.name: path.read_bytes() for path in paths if path.exists()}


def test_the_space_says_the_queue_is_unavailable_instead_of_accepting_a_submission(tmp_path):
    settings = LeaderboardSettings(db_url=f"sqlite:///{tmp_path / 'queue.sqlite'}", local_model_roots=(tmp_path,))
    leaderboard = Leaderboard(settings)
    (tmp_path / "queue.sqlite").unlink()
    answer = leaderboard.submit_model(
        "smollm2-135m-instruct", "main", "auto", ["factcheck"], ["random_baseline"], "alice"
    )
    assert answer.startswith("Rejected") and "removed" in answer


def test_a_lock_held_from_outside_makes_reads_busy_within_the_read_timeout(database):
    queue = JobQueue.open(f"sqlite:///{database}", read_timeout_s=0.5)
    queue.submit(REQUEST, "alice", pair_cap=2)
    queue.engine.dispose()  # an exclusive lock needs every other connection closed
    outside = sqlite3.connect(database, isolation_level=None)
    outside.execute("PRAGMA locking_mode=EXCLUSIVE")
    outside.execute("BEGIN EXCLUSIVE")
    outside.execute("UPDATE jobs SET reason = 'held'")
    try:
        started = time.monotonic()
        with pytest.raises(QueueBusy, match="queue is busy"):
            queue.jobs()
        with pytest.raises(QueueBusy, match="queue is busy"):
            queue.stored_scores()
        assert time.monotonic() - started < 5
    finally:
        outside.execute("ROLLBACK")
        outside.close()
    assert [job.submitter for job in queue.jobs()] == ["alice"]


def test_reads_take_no_write_lock(database):
    """A writer holding the write lock does not block a reader (WAL), which sees the last committed state."""
    queue = JobQueue.open(f"sqlite:///{database}", read_timeout_s=0.5)
    queue.submit(REQUEST, "alice", pair_cap=2)
    writer = sqlite3.connect(database, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE jobs SET submitter = 'mallory'")
    try:
        assert [job.submitter for job in queue.jobs()] == ["alice"]
    finally:
        writer.execute("ROLLBACK")
        writer.close()

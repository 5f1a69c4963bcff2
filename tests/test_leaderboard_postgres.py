"""A real PostgreSQL server (Debian's `postgresql`): two workers claim every job exactly once; the rate limit holds
under concurrent submissions; queue times come from the server's clock."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time

import pytest
from concurrent_submissions import submit_at_once
from sqlalchemy import select

from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.leaderboard.queue import FINISHED, MODEL_JOB, JobQueue, JobRequest, RateLimited
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.leaderboard.worker import TaskOutcome, Worker

pytestmark = pytest.mark.slow
BINDIRS = sorted(glob.glob("/usr/lib/postgresql/*/bin"))


@pytest.fixture()
def postgres_url():
    if not BINDIRS:
        pytest.skip("Debian package 'postgresql' is not installed (make system-test-deps)")
    bindir, folder = BINDIRS[-1], tempfile.mkdtemp(prefix="causaldiag-pg-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root; the Debian package's `postgres` user runs the server
        os.chown(folder, pwd.getpwnam("postgres").pw_uid, pwd.getpwnam("postgres").pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = os.path.join(folder, "data")
    subprocess.run(
        [*as_user, f"{bindir}/initdb", "-D", data, "-U", "bench", "--auth=trust"], check=True, capture_output=True
    )
    subprocess.run(
        [
            *as_user,
            f"{bindir}/pg_ctl",
            "-D",
            data,
            "-l",
            os.path.join(folder, "log"),
            "-w",
            "-o",
            f"-p {port} -k {folder} -h 127.0.0.1",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://bench@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_user, f"{bindir}/pg_ctl", "-D", data, "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


def test_two_workers_claim_every_job_once(postgres_url):
    queue = JobQueue.open(postgres_url)
    assert queue.claims_skip_locked
    for i in range(12):
        queue.submit(
            JobRequest(
                MODEL_JOB,
                "smollm2-135m-instruct",
                "main",
                "auto",
                "ice",
                "synthetic",
                ("factcheck",),
                ("random_baseline",),
                f"variant-{i}",
            ),
            "alice",
            pair_cap=None,
        )
    ran: list[tuple[str, int]] = []
    lock = threading.Lock()

    def runner_for(name: str):
        def runner(job, task, write):
            time.sleep(0.2)  # long enough that both workers are busy at once
            with lock:
                ran.append((name, job.id))
            return TaskOutcome("1.0.0", [PairScoreRow(f"{job.id}", task, "random_baseline", "v", 1.0, 0.0, 1.0)])

        return runner

    settings = LeaderboardSettings(db_url=postgres_url)
    workers = [Worker(JobQueue.open(postgres_url), settings, runner=runner_for(n), name=n) for n in ("a", "b")]

    def drain(worker: Worker) -> None:
        while worker.run_once() is not None:
            pass

    threads = [threading.Thread(target=drain, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(job_id for _, job_id in ran) == sorted(j.id for j in queue.jobs())
    assert {name for name, _ in ran} == {"a", "b"}, "both workers must have claimed jobs"
    assert {j.worker for j in queue.jobs()} == {"a", "b"}
    assert all(j.status == FINISHED for j in queue.jobs()) and len(queue.finished_scores()) == 12


def test_rate_limit_holds_under_concurrent_submissions_and_times_come_from_the_server(postgres_url):
    queue = JobQueue.open(postgres_url)
    answers = submit_at_once(queue, "alice", 12, hourly_limit=3)
    assert sum(isinstance(a, RateLimited) for a in answers) == 9 and len(queue.jobs("alice")) == 3
    with queue.engine.begin() as conn:
        server_now = conn.execute(select(queue.now())).scalar()
    job = queue.claim("w")
    assert abs((job.heartbeat_at - server_now).total_seconds()) < 60
    assert queue.requeue_stale(3600) == [] and queue.requeue_stale(0) == [job.id]

"""The worker-kill loop of the security campaign: 8 jobs of 3 tasks on one SQLite queue, and worker processes
SIGKILLed at random moments, each after it stored at least one task of its job and before the job's last task, on
every claim of a job but its last (MAX_ATTEMPTS): 16 kills when no moment is missed; then a last worker drains the
queue. Every job must finish with each task's rows stored exactly once: a kill loses only the task it interrupted,
which the job's next claim redoes. Were a job killed on its last claim anyway, FAILED with "stopped sending
heartbeats" would be the expected answer, not a loss."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import pytest
from security_campaign import ACCEPTED, ACCEPTED_WRONGLY, LOST, REJECTED, CampaignRecorder
from sqlalchemy import func, select
from test_leaderboard_queue import rows

from recoe_causaldiag.leaderboard.queue import (
    FAILED,
    FINISHED,
    MAX_ATTEMPTS,
    MODEL_JOB,
    PENDING,
    RUNNING,
    Job,
    JobQueue,
    JobRequest,
)
from recoe_causaldiag.leaderboard.schema import pair_scores
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.leaderboard.worker import TaskOutcome, TaskRunner, Worker

pytestmark = pytest.mark.security

CAMPAIGN = "worker kills"
JOBS, ROWS = 8, 3
TASKS = ("factcheck", "analogy", "multihop")
HEARTBEAT_TIMEOUT_S = 1
TASK_SECONDS = (0.4, 0.7)
KILL_DELAY_S = (0.0, 0.15)
"""Shorter than a task, so a kill lands inside the task after the one just stored."""


def job_request(i: int, tasks: tuple[str, ...]) -> JobRequest:
    """The i-th of distinct requests (they differ by revision)."""
    return JobRequest(
        MODEL_JOB, "smollm2-135m-instruct", f"rev{i}", "auto", "ice", "synthetic", tasks, ("random_baseline",)
    )


def unfinished(queue: JobQueue) -> bool:
    return any(job.status in (PENDING, RUNNING) for job in queue.jobs())


@dataclass(frozen=True)
class ScriptedWorker:
    """A worker process's life: it runs jobs until none is pending or running, with a runner that writes
    "<job> <task> <worker>" to `task_log` as it starts a task, sleeps `task_seconds` and returns ROWS rows."""

    db_url: str
    name: str
    task_log: Path
    task_seconds: tuple[float, float] = TASK_SECONDS

    def __call__(self) -> None:
        queue = JobQueue.open(self.db_url)
        settings = LeaderboardSettings(db_url=self.db_url, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S)
        worker = Worker(queue, settings, runner=self._runner(random.Random()), name=self.name)
        while worker.run_once() is not None or unfinished(queue):
            time.sleep(0.05)

    def _runner(self, rng: random.Random) -> TaskRunner:
        def run(job: Job, task: str, write: Callable[[str], None]) -> TaskOutcome:
            with self.task_log.open("a") as log:
                log.write(f"{job.id} {task} {self.name}\n")
            time.sleep(rng.uniform(*self.task_seconds))
            return TaskOutcome("1.0.0", rows(task, ROWS))

        return run


def started_tasks(task_log: Path) -> list[tuple[int, str, str]]:
    """(job id, task, worker) of every task a worker started, in order."""
    if not task_log.exists():
        return []
    return [
        (int(job), task, worker)
        for job, task, worker in (line.split() for line in task_log.read_text().split("\n") if line)
    ]


def _fork_on_request(requests: Connection) -> None:
    """Fork a child per callable received and answer its pid; in a session of its own, so that killing the
    session's group ends every child."""
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while (call := requests.recv()) is not None:
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                call()
            except BaseException:
                traceback.print_exc()
                os._exit(1)
            os._exit(0)
        requests.send(pid)


class ForkedProcesses:
    """Processes forked on request from one clean parent (spawned and single-threaded, the worker already imported),
    so each starts at once instead of importing the worker anew; leaving the block kills them all."""

    def __enter__(self) -> ForkedProcesses:
        context = multiprocessing.get_context("spawn")
        self._requests, theirs = context.Pipe()
        self._parent = context.Process(target=_fork_on_request, args=(theirs,))
        self._parent.start()
        return self

    def start(self, call: Callable[[], None]) -> int:
        """The pid of a new process that runs `call` (a picklable callable)."""
        self._requests.send(call)
        return self._requests.recv()

    def __exit__(self, *exc: object) -> None:
        try:
            os.killpg(self._parent.pid, signal.SIGKILL)
        except ProcessLookupError:  # it died before it took its own session
            self._parent.kill()
        self._parent.join()


def wait_for(condition: Callable[[], bool], timeout_s: float, poll_s: float = 0.03) -> bool:
    """Whether `condition` came true within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)
    return True


def killable(queue: JobQueue, name: str, task_log: Path) -> bool:
    """Whether `name` runs a job with claims left, has stored at least one of its tasks, and has tasks left."""
    for job in queue.jobs():
        if job.status == RUNNING and job.worker == name and job.attempts < MAX_ATTEMPTS:
            stored = queue.done_tasks(job.id)
            mine = {task for job_id, task, worker in started_tasks(task_log) if (job_id, worker) == (job.id, name)}
            return bool(stored & mine) and len(stored) < len(job.request.tasks)
    return False


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@dataclass(frozen=True)
class Kill:
    """A SIGKILLed worker and the job it held when it died (None: it died between jobs)."""

    worker: str
    job_id: int | None
    attempt: int = 0
    stored: int = 0


def kill(pid: int, queue: JobQueue, name: str) -> Kill:
    os.kill(pid, signal.SIGKILL)
    assert wait_for(lambda: gone(pid), 10), f"worker {name} outlived its SIGKILL"
    held = [job for job in queue.jobs() if job.status == RUNNING and job.worker == name]
    if not held:
        return Kill(name, None)
    return Kill(name, held[0].id, held[0].attempts, len(queue.done_tasks(held[0].id)))


def rows_per_task(queue: JobQueue) -> Counter[tuple[int, str]]:
    """How many per-pair rows are stored for each (job, task), whatever the job's status."""
    query = select(pair_scores.c.job_id, pair_scores.c.task, func.count()).group_by(
        pair_scores.c.job_id, pair_scores.c.task
    )
    with queue.engine.connect() as conn:
        return Counter({(job_id, task): n for job_id, task, n in conn.execute(query)})


def job_outcome(job: Job, stored: Counter[tuple[int, str]], kills: int) -> tuple[str, str]:
    """What a job came to: finished with every task's rows stored once, or (killed on every claim) FAILED as the
    queue promises; a task stored twice is accepted wrongly, anything else lost."""
    counts = [stored[(job.id, task)] for task in job.request.tasks]
    if any(n > ROWS for n in counts):
        return ACCEPTED_WRONGLY, f"rows per task {counts}: a task stored twice"
    if job.status == FINISHED and all(n == ROWS for n in counts):
        return ACCEPTED, f"finished on claim {job.attempts} after {kills} kill(s), every task stored once"
    if job.status == FAILED and kills >= MAX_ATTEMPTS and "heartbeats" in job.reason:
        return REJECTED, job.reason
    return LOST, f"{job.status} with rows per task {counts} after {kills} kill(s)"


def record(campaign: CampaignRecorder, queue: JobQueue, kills: list[Kill]) -> None:
    """Each job and each kill in the table; a kill counts as rejected when the job it interrupted still ended as
    expected."""
    stored = rows_per_task(queue)
    ends = {}
    for job in sorted(queue.jobs(), key=lambda job: job.id):
        ends[job.id] = job_outcome(job, stored, sum(k.job_id == job.id for k in kills))
        campaign.record(CAMPAIGN, f"job {job.id}", *ends[job.id])
    for n, k in enumerate(kills, 1):
        if k.job_id is None:
            campaign.record(CAMPAIGN, f"kill {n}", REJECTED, f"{k.worker} killed between jobs")
            continue
        outcome, reason = ends[k.job_id]
        killed = f"{k.worker} killed on claim {k.attempt} of job {k.job_id} with {k.stored}/{len(TASKS)} tasks stored"
        held = outcome in (ACCEPTED, REJECTED)
        campaign.record(CAMPAIGN, f"kill {n}", REJECTED if held else outcome, f"{killed}; then the job {reason}")


def test_sigkilled_workers_lose_and_duplicate_nothing(tmp_path, campaign):
    db_url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    queue = JobQueue.open(db_url)
    for i in range(JOBS):
        queue.submit(job_request(i, TASKS), "campaign", pair_cap=None)
    task_log, rng, kills = tmp_path / "tasks.log", random.Random(), []
    with ForkedProcesses() as processes:
        for n in range(JOBS * (MAX_ATTEMPTS - 1)):
            name = f"worker{n}"
            pid = processes.start(ScriptedWorker(db_url, name, task_log))
            moment = wait_for(lambda name=name, pid=pid: gone(pid) or killable(queue, name, task_log), 30)
            assert moment, f"{name} neither reached a moment to be killed nor ended"
            if gone(pid):  # it ran every job left to its end: no claim is left to kill
                break
            time.sleep(rng.uniform(*KILL_DELAY_S))
            kills.append(kill(pid, queue, name))
        processes.start(ScriptedWorker(db_url, "drainer", task_log))
        drained = wait_for(lambda: not unfinished(queue), 90, poll_s=0.2)
    record(campaign, queue, kills)
    assert drained, "the last worker did not drain the queue"
    assert len(kills) >= 10 and len({k.job_id for k in kills} - {None}) >= JOBS, kills
    assert not campaign.failures(), campaign.failures()

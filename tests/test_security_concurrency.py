"""The concurrency cases of the security campaign, with processes (not only threads) on one SQLite queue: 20
identical submissions at once make one job; a rate limit of 3 holds under 20 submissions at once; two worker
processes on one queue never run the same job."""

from __future__ import annotations

import multiprocessing
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from security_campaign import ACCEPTED, ACCEPTED_WRONGLY, LOST, REJECTED
from test_leaderboard_queue import REQUEST, _submit_from_process
from test_security_worker_kills import (
    ROWS,
    ForkedProcesses,
    ScriptedWorker,
    job_request,
    rows_per_task,
    started_tasks,
    unfinished,
    wait_for,
)

from recoe_causaldiag.leaderboard.queue import FINISHED, JobQueue, RateLimited

pytestmark = pytest.mark.security

CAMPAIGN = "concurrency"
SUBMITTERS = 20
RATE_LIMIT = 3


def _fork_released_together(target: Callable[..., None], args: tuple[Any, ...], count: int, answers) -> None:
    """In a clean spawned process: fork `count` children that each run `target(*args, barrier, results)`, released
    together by one barrier, and put what they put into `results` into `answers`, as one list."""
    fork = multiprocessing.get_context("fork")
    barrier, results = fork.Barrier(count), fork.Queue()
    children = [fork.Process(target=target, args=(*args, barrier, results)) for _ in range(count)]
    for child in children:
        child.start()
    answers.put([results.get(timeout=120) for _ in children])
    for child in children:
        child.join(timeout=30)


def released_together(target: Callable[..., None], args: tuple[Any, ...], count: int) -> list[Any]:
    """What `target(*args, barrier, results)` put into `results` in each of `count` processes released at once.
    They are forked from one clean process, so that 20 of them start in a moment instead of each importing the
    package anew."""
    spawn = multiprocessing.get_context("spawn")
    answers = spawn.Queue()
    launcher = spawn.Process(target=_fork_released_together, args=(target, args, count, answers))
    launcher.start()
    try:
        return answers.get(timeout=180)
    finally:
        launcher.join(timeout=30)


def _submit_distinct_from_process(url: str, barrier, results) -> None:
    """One submitter's request, distinct from every other process's, under the rate limit: (job id, "") when it was
    accepted, (None, the refusal) when it was rate limited."""
    queue = JobQueue.open(url)
    request = replace(REQUEST, tasks=(f"task{os.getpid()}",))
    barrier.wait()
    try:
        results.put((queue.submit(request, "alice", pair_cap=None, hourly_limit=RATE_LIMIT).job.id, ""))
    except RateLimited as refusal:
        results.put((None, str(refusal)))


def test_identical_submissions_from_processes_at_once_make_one_job(tmp_path, campaign):
    """Each answer names the one job; exactly one of them made it, the others are told it already exists."""
    url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    JobQueue.open(url)
    answers = released_together(_submit_from_process, (url,), SUBMITTERS)
    jobs, makers = JobQueue.open(url).jobs(), sum(not duplicate for _, duplicate in answers)
    for n, (job_id, duplicate) in enumerate(answers, 1):
        if len(jobs) == 1 and job_id == jobs[0].id and makers == 1:
            reason = f"answered with the existing job {job_id}" if duplicate else f"made job {job_id}"
            campaign.record(CAMPAIGN, f"identical submission {n}", ACCEPTED, reason)
        else:
            reason = f"job {job_id}: {len(jobs)} jobs, {makers} made, for one request"
            campaign.record(CAMPAIGN, f"identical submission {n}", ACCEPTED_WRONGLY, reason)
    assert len(answers) == SUBMITTERS and not campaign.failures(), campaign.failures()


def test_the_rate_limit_holds_under_submissions_from_processes_at_once(tmp_path, campaign):
    """Of 20 distinct requests of one submitter at once, exactly 3 are accepted; every other is refused with the
    rate limit's reason."""
    url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    JobQueue.open(url)
    answers = released_together(_submit_distinct_from_process, (url,), SUBMITTERS)
    accepted = sorted(job_id for job_id, _ in answers if job_id is not None)
    for n, job_id in enumerate(accepted, 1):
        outcome = ACCEPTED if n <= RATE_LIMIT else ACCEPTED_WRONGLY
        campaign.record(CAMPAIGN, f"rate-limited submission {n}", outcome, f"job {job_id}, {n} of limit {RATE_LIMIT}")
    for n, (_, refusal) in enumerate((a for a in answers if a[0] is None), len(accepted) + 1):
        campaign.record(CAMPAIGN, f"rate-limited submission {n}", REJECTED, refusal)
    assert len(answers) == SUBMITTERS and len(JobQueue.open(url).jobs("alice")) == RATE_LIMIT
    assert not campaign.failures(), campaign.failures()


def test_two_worker_processes_never_run_the_same_job(tmp_path, campaign):
    """Two workers claim from one queue of 10 jobs of 2 tasks: each task is started once, by the worker that
    claimed its job on its first claim, and both workers take part."""
    url = f"sqlite:///{tmp_path / 'queue.sqlite'}"
    queue = JobQueue.open(url)
    for i in range(10):
        queue.submit(job_request(i, ("factcheck", "analogy")), "campaign", pair_cap=None)
    task_log = tmp_path / "tasks.log"
    with ForkedProcesses() as processes:
        for name in ("worker-a", "worker-b"):
            processes.start(ScriptedWorker(url, name, task_log, task_seconds=(0.1, 0.3)))
        drained = wait_for(lambda: not unfinished(queue), 60, poll_s=0.2)
    started, stored = Counter((job_id, worker) for job_id, _, worker in started_tasks(task_log)), rows_per_task(queue)
    for job in sorted(queue.jobs(), key=lambda job: job.id):
        ran_by = sorted(worker for job_id, worker in started if job_id == job.id)
        counts = [stored[(job.id, task)] for task in job.request.tasks]
        if job.status != FINISHED or counts != [ROWS] * len(counts):
            campaign.record(CAMPAIGN, f"job {job.id} of two workers", LOST, f"{job.status}, rows per task {counts}")
        elif len(ran_by) != 1 or started[(job.id, ran_by[0])] != len(job.request.tasks) or job.attempts != 1:
            reason = f"run by {', '.join(ran_by)} on {job.attempts} claims"
            campaign.record(CAMPAIGN, f"job {job.id} of two workers", ACCEPTED_WRONGLY, reason)
        else:
            reason = f"run once, by {ran_by[0]}"
            campaign.record(CAMPAIGN, f"job {job.id} of two workers", ACCEPTED, reason)
    assert drained and {worker for _, worker in started} == {"worker-a", "worker-b"}
    assert not campaign.failures(), campaign.failures()

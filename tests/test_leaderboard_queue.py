"""The job queue: transitions, one job under concurrent duplicate submissions, re-queue after a killed worker,
and submitted metrics isolated in a child process."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
from concurrent_submissions import submit_at_once
from submitted_modules import submitted_module

from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.leaderboard import landlock
from recoe_causaldiag.leaderboard.metric_sandbox import PACKAGE_DIR, Confinement, MetricRunError, score_submitted_metric
from recoe_causaldiag.leaderboard.queue import (
    AWAITING_APPROVAL,
    FAILED,
    FINISHED,
    METRIC_JOB,
    MODEL_JOB,
    PENDING,
    RUNNING,
    JobQueue,
    JobRequest,
    RateLimited,
)
from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
from recoe_causaldiag.leaderboard.worker import INTERRUPT_GRACE_S, TaskOutcome, Worker

REQUEST = JobRequest(
    MODEL_JOB,
    "smollm2-135m-instruct",
    "main",
    "auto",
    "ice",
    "synthetic",
    ("factcheck", "analogy"),
    ("random_baseline",),
)


def rows(task: str, n: int = 3) -> list[PairScoreRow]:
    return [PairScoreRow(f"{task}-{i}", task, "random_baseline", "v", 1.0, 0.0, 1.0) for i in range(n)]


@pytest.fixture()
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'queue.sqlite'}"


def test_rows_with_and_without_a_cluster_are_stored_as_they_are_in_either_order(db_url):
    queue = JobQueue.open(db_url)
    alone, clustered = rows("factcheck", 2)
    clustered = replace(clustered, cluster="Lou Gehrig")
    for k, stored in enumerate(([alone, clustered], [clustered, alone])):
        queue.store_finished(replace(REQUEST, model=f"m{k}"), "results file", [("factcheck", "1.4.0", stored)], "")
    read = [(s.job_id, s.row) for s in queue.finished_scores()]
    assert read == [(1, alone), (1, clustered), (2, clustered), (2, alone)]
    assert [s.to_json()["cluster"] for s in queue.finished_scores()] == [None, "Lou Gehrig", "Lou Gehrig", None]


def test_transitions_pending_running_finished_and_failed(db_url):
    queue = JobQueue.open(db_url)
    job = queue.submit(REQUEST, "alice", pair_cap=4).job
    assert (job.status, job.pair_cap) == (PENDING, 4)
    claimed = queue.claim("w1")
    assert (claimed.id, claimed.status, claimed.worker, claimed.attempts) == (job.id, RUNNING, "w1", 1)
    assert queue.claim("w2") is None
    assert queue.heartbeat(job.id, "w1", "log line") and not queue.heartbeat(job.id, "w2", "")
    assert not queue.record_task(job.id, "w2", "factcheck", "1.0.0", 1.0, rows("factcheck")), "w2 holds no job"
    assert queue.record_task(job.id, "w1", "factcheck", "1.0.0", 1.0, rows("factcheck"))
    assert not queue.record_task(job.id, "w1", "factcheck", "1.0.0", 1.0, rows("factcheck")), "stored once"
    with pytest.raises(ValueError, match="rows of task.s. analogy cannot be stored as task factcheck"):
        queue.record_task(job.id, "w1", "factcheck", "1.0.0", 1.0, rows("analogy"))
    assert queue.done_tasks(job.id) == {"factcheck"}
    assert queue.finish(job.id, "w1", "done")
    assert queue.get(job.id).status == FINISHED and len(queue.finished_scores()) == 3

    other = queue.submit(
        JobRequest(MODEL_JOB, "gemma-3-270m", "main", "auto", "ice", "synthetic", ("factcheck",), ("random_baseline",)),
        "bob",
        pair_cap=None,
    ).job
    queue.claim("w1")
    assert queue.fail(other.id, "w1", "ValueError: broken", "traceback tail")
    failed = queue.get(other.id)
    assert (failed.status, failed.reason, failed.log_tail) == (FAILED, "ValueError: broken", "traceback tail")
    resubmitted = queue.submit(failed.request, "carol", pair_cap=2)
    assert not resubmitted.duplicate, "a failed request may be submitted again"
    revived = resubmitted.job
    assert (revived.id, revived.status, revived.reason, revived.attempts) == (other.id, PENDING, "", 0)
    assert (revived.submitter, revived.pair_cap) == ("carol", 2)
    again = queue.submit(failed.request, "dave", pair_cap=None)
    assert again.duplicate and again.job.id == other.id


def test_a_worker_records_the_parameter_count_of_the_model_it_loaded(db_url):
    queue = JobQueue.open(db_url)
    queue.submit(REQUEST, "alice", pair_cap=None)

    def runner(job, task, write):
        return TaskOutcome("1.0.0", rows(task, 1), parameters=134_515_008)

    finished = Worker(queue, LeaderboardSettings(db_url=db_url), runner=runner, name="w1").run_once()
    assert finished.status == FINISHED
    assert {s.parameters for s in queue.finished_scores()} == {134_515_008}


def test_a_resubmitted_failed_job_keeps_the_tasks_it_stored(db_url):
    queue = JobQueue.open(db_url)
    queue.submit(REQUEST, "alice", pair_cap=None)

    def failing_on_analogy(job, task, write):
        if task == "analogy":
            raise RuntimeError("out of memory")
        return TaskOutcome("1.0.0", rows(task, 1))

    settings = LeaderboardSettings(db_url=db_url)
    first = Worker(queue, settings, runner=failing_on_analogy, name="w1").run_once()
    assert first.status == FAILED and queue.done_tasks(first.id) == {"factcheck"}
    ran: list[str] = []

    def runner(job, task, write):
        ran.append(task)
        return TaskOutcome("1.0.0", rows(task, 1))

    assert queue.submit(REQUEST, "alice", pair_cap=None).job.id == first.id
    second = Worker(queue, settings, runner=runner, name="w2").run_once()
    assert second.status == FINISHED and ran == ["analogy"], "the stored factcheck scores must not be redone"
    assert sorted(r.row.pair_id for r in queue.finished_scores()) == ["analogy-0", "factcheck-0"]


def test_a_worker_that_lost_its_job_stores_nothing(db_url):
    queue = JobQueue.open(db_url)
    job = queue.submit(REQUEST, "alice", pair_cap=None).job
    settings = LeaderboardSettings(db_url=db_url, heartbeat_timeout_s=1)

    def slow_runner(job, task, write):
        time.sleep(2.5)  # past the heartbeat timeout with its heart stopped: another worker takes the job
        return TaskOutcome("1.0.0", rows(task, 1))

    stale = Worker(queue, settings, runner=slow_runner, name="stale")
    stale.queue = JobQueue.open(db_url)
    stale.queue.heartbeat = lambda *args: True  # a heart that beats into the void, as after a network split
    claimed = stale.queue.claim("stale")
    thief = threading.Thread(target=lambda: (time.sleep(1.5), queue.requeue_stale(1), queue.claim("other")))
    thief.start()
    stale._execute(claimed)
    thief.join()
    assert queue.get(job.id).worker == "other" and queue.done_tasks(job.id) == set()


def test_duplicate_submission_is_answered_with_the_existing_job(db_url):
    queue = JobQueue.open(db_url)
    first = queue.submit(REQUEST, "alice", pair_cap=None)
    reordered = JobRequest(**{**REQUEST.__dict__, "tasks": ("analogy", "factcheck")})
    again = queue.submit(reordered, "bob", pair_cap=None)
    assert again.duplicate and again.job.id == first.job.id and len(queue.jobs()) == 1


def test_concurrent_duplicates_from_threads_make_exactly_one_job(db_url):
    queue = JobQueue.open(db_url)
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda i: queue.submit(REQUEST, f"user{i}", pair_cap=None), range(16)))
    assert len({a.job.id for a in answers}) == 1 and sum(not a.duplicate for a in answers) == 1
    assert len(queue.jobs()) == 1


def test_concurrent_submissions_of_one_submitter_never_pass_the_rate_limit(db_url):
    queue = JobQueue.open(db_url)
    answers = submit_at_once(queue, "alice", 12, hourly_limit=3)
    assert sum(isinstance(a, RateLimited) for a in answers) == 9 and len(queue.jobs("alice")) == 3
    assert "3 submissions per hour" in str(next(a for a in answers if isinstance(a, RateLimited)))
    bob = queue.submit(REQUEST, "bob", pair_cap=None, hourly_limit=3)
    assert bob.job.submitter == "bob", "limits are per submitter"
    first = queue.jobs("alice")[-1]
    assert queue.submit(first.request, "alice", pair_cap=None, hourly_limit=3).duplicate, "duplicates pass the limit"


def _submit_from_process(url: str, barrier, results) -> None:
    queue = JobQueue.open(url)
    barrier.wait()
    answer = queue.submit(REQUEST, f"pid{os.getpid()}", pair_cap=None)
    results.put((answer.job.id, answer.duplicate))


def test_concurrent_duplicates_from_processes_make_exactly_one_job(db_url):
    JobQueue.open(db_url)
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(4), context.Queue()
    processes = [context.Process(target=_submit_from_process, args=(db_url, barrier, results)) for _ in range(4)]
    for p in processes:
        p.start()
    answers = [results.get(timeout=120) for _ in processes]
    for p in processes:
        p.join(timeout=60)
    assert len({job_id for job_id, _ in answers}) == 1 and sum(not dup for _, dup in answers) == 1
    assert len(JobQueue.open(db_url).jobs()) == 1


WORKER_SCRIPT = textwrap.dedent("""
    import sys, time
    from recoe_causaldiag.leaderboard.queue import JobQueue
    from recoe_causaldiag.leaderboard.settings import LeaderboardSettings
    from recoe_causaldiag.api.rows import PairScoreRow
    from recoe_causaldiag.leaderboard.worker import INTERRUPT_GRACE_S, TaskOutcome, Worker

    def runner(job, task, write):
        if task == "analogy":
            time.sleep(600)  # killed here, after factcheck was stored
        return TaskOutcome("1.0.0", [PairScoreRow(task + "-0", task, "random_baseline", "v", 1.0, 0.0, 1.0)])

    settings = LeaderboardSettings(db_url=sys.argv[1], heartbeat_timeout_s=1)
    Worker(JobQueue.open(sys.argv[1]), settings, runner=runner, name="doomed").run_once()
""")


def test_job_of_a_killed_worker_is_requeued_and_its_stored_task_kept(db_url, tmp_path):
    queue = JobQueue.open(db_url)
    job = queue.submit(REQUEST, "alice", pair_cap=None).job
    script = tmp_path / "doomed_worker.py"
    script.write_text(WORKER_SCRIPT)
    child = subprocess.Popen([sys.executable, str(script), db_url])
    try:
        deadline = time.monotonic() + 90
        while queue.done_tasks(job.id) != {"factcheck"}:
            assert time.monotonic() < deadline and child.poll() is None, "the worker never stored factcheck"
            time.sleep(0.2)
        assert queue.get(job.id).status == RUNNING
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    time.sleep(1.5)
    ran: list[str] = []

    def runner(job, task, write):
        ran.append(task)
        return TaskOutcome("1.0.0", rows(task, 1))

    settings = LeaderboardSettings(db_url=db_url, heartbeat_timeout_s=1)
    ended = Worker(queue, settings, runner=runner, name="survivor").run_once()
    assert ended.id == job.id and ended.status == FINISHED and ended.attempts == 2
    assert ran == ["analogy"], "the task stored before the kill must not be redone"
    assert sorted(r.row.pair_id for r in queue.finished_scores()) == ["analogy-0", "factcheck-0"]


def test_a_job_that_errors_ends_failed_with_a_short_public_reason(db_url, caplog):
    queue = JobQueue.open(db_url)
    queue.submit(REQUEST, "alice", pair_cap=None)

    def runner(job, task, write):
        raise RuntimeError(f"label 'Yes' is 2 tokens in {db_url.removeprefix('sqlite:///')}\nsecond line")

    with caplog.at_level(logging.ERROR, logger="recoe_causaldiag.leaderboard.worker"):
        ended = Worker(queue, LeaderboardSettings(db_url=db_url), runner=runner).run_once()
    assert (ended.status, ended.reason) == (FAILED, "RuntimeError: label 'Yes' is 2 tokens in queue.sqlite")
    assert "Traceback" not in ended.log_tail and "/" not in ended.log_tail.split("failed: ", 1)[1]
    assert "second line" in caplog.text and "Traceback" in caplog.text, "the full error goes to the server's log"


def busy_python(job, task, write):
    while True:
        time.sleep(0.05)


def stuck_in_native_code(job, task, write):
    threading.Event().wait()


@pytest.mark.parametrize("runner", [busy_python, stuck_in_native_code])
def test_a_job_past_its_wall_clock_limit_fails_and_the_worker_moves_on(db_url, runner):
    queue = JobQueue.open(db_url)
    first = queue.submit(REQUEST, "alice", pair_cap=None).job
    second = queue.submit(replace(REQUEST, model="gemma-3-270m"), "alice", pair_cap=None).job
    settings = LeaderboardSettings(db_url=db_url, job_time_limit_s=2, heartbeat_timeout_s=1)
    worker = Worker(queue, settings, runner=runner, name="w")
    started = time.monotonic()
    ended = worker.run_once()
    assert time.monotonic() - started < 2 + INTERRUPT_GRACE_S + 3
    assert (ended.id, ended.status, ended.reason) == (first.id, FAILED, "the job exceeded its wall-clock limit of 2 s")
    beat_at = queue.get(first.id).heartbeat_at
    time.sleep(1.5)
    assert queue.get(first.id).heartbeat_at == beat_at, "no heartbeat for a job the worker gave up"
    assert queue.requeue_stale(settings.heartbeat_timeout_s) == [], "a FAILED job is never re-queued"
    worker.runner = lambda job, task, write: TaskOutcome("1.0.0", rows(task, 1))
    assert worker.run_once().id == second.id and queue.get(second.id).status == FINISHED


def test_metric_jobs_wait_for_approval(db_url):
    queue = JobQueue.open(db_url)
    request = JobRequest(
        METRIC_JOB,
        "smollm2-135m-instruct",
        "main",
        "auto",
        "ice",
        "synthetic",
        ("factcheck",),
        ("my_metric",),
        "/tmp/my_metric",
    )
    job = queue.submit(request, "alice", pair_cap=None).job
    assert job.status == AWAITING_APPROVAL and queue.claim("w") is None
    assert queue.approve(job.id, "ab" * 32) and queue.get(job.id).status == PENDING
    claimed = queue.claim("w")
    assert (claimed.id, claimed.approved_sha256) == (job.id, "ab" * 32), "the worker learns the approved hash"


SUBMITTED_METRIC = submitted_module(
    "Probe",
    """
            if os.environ.get("PROBE_GRANDCHILD"):
                delay = os.environ.get("PROBE_GRANDCHILD_DELAY", "4")
                subprocess.Popen(["sh", "-c", f"sleep {delay}; touch " + os.environ["PROBE_GRANDCHILD"]],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(float(os.environ.get("PROBE_SLEEP", "0")))
            leaked = any(k in os.environ for k in ("CAUSALDIAG_LEADERBOARD_DB", "CAUSALDIAG_ADMIN_TOKEN",
                                                   "PGPASSWORD"))
            leaked = leaked or any("secret-db" in v for v in os.environ.values())
            reachable = []
            for path in filter(None, (os.environ.get("PROBE_FILE"), f"/proc/{os.getppid()}/environ")):
                try:
                    with open(path, "rb"):
                        reachable.append(path)
                except OSError:
                    pass
            score = -1.0 if leaked else -2.0 if reachable and os.environ.get("PROBE_FILE") else None
            return {"variant": "length", "scores": [score or float(len(e)) for e in explanations]}
""",
    """
    import os
    import subprocess
    import time
""",
)


def test_submitted_metric_runs_isolated_without_credentials_and_with_a_time_limit(
    tmp_path, monkeypatch, factcheck_pairs
):
    module = tmp_path / "probe"
    module.mkdir()
    (module / "probe.py").write_text(SUBMITTED_METRIC)
    monkeypatch.setenv("CAUSALDIAG_LEADERBOARD_DB", "postgresql://u:secret-db@host/db")
    monkeypatch.setenv("SOME_URL", "postgresql://u:secret-db@host/db")
    monkeypatch.setenv("PGPASSWORD", "hunter2")
    pairs = factcheck_pairs[:3]
    scored = score_submitted_metric(
        str(module), "smollm2-135m-instruct", pairs, time_limit_s=120, secrets=("postgresql://u:secret-db@host/db",)
    )
    assert scored.variant == "length"
    assert list(scored.faithful) == [float(len(p.explanation_faithful)) for p in pairs]
    monkeypatch.setenv("PROBE_SLEEP", "30")
    marker = tmp_path / "grandchild-outlived-the-limit"
    monkeypatch.setenv("PROBE_GRANDCHILD", str(marker))
    for_run = Confinement.for_run  # the grandchild may write the marker, so only the kill can stop it
    monkeypatch.setattr(
        Confinement,
        "for_run",
        classmethod(
            lambda cls, scratch, model, protected: cls(
                for_run(scratch, model, ()).read_only, (str(scratch), "/dev", str(tmp_path))
            )
        ),
    )
    with pytest.raises(MetricRunError, match="time limit of 3 s"):
        score_submitted_metric(str(module), "smollm2-135m-instruct", pairs, time_limit_s=3, secrets=())
    time.sleep(3)
    assert not marker.exists(), "the time limit must kill the metric's whole process group"
    monkeypatch.setenv("PROBE_SLEEP", "0")
    monkeypatch.setenv("PROBE_GRANDCHILD_DELAY", "10")  # detached from the pipes: it outlives a metric that returns
    score_submitted_metric(str(module), "smollm2-135m-instruct", pairs[:1], time_limit_s=120, secrets=())
    time.sleep(12)
    assert not marker.exists(), "a metric that returns leaves no process behind"


@pytest.mark.skipif(landlock.abi_version() < 1, reason="needs a kernel with Landlock")
def test_submitted_metric_as_the_apps_own_user_cannot_open_the_queue_or_the_apps_proc_entries(
    tmp_path, monkeypatch, factcheck_pairs
):
    """The default deployment (no sandbox user): Landlock keeps the child from the queue's SQLite file and the
    worker's /proc/<pid>/environ, even when the app runs as root, and the metric still scores."""
    module = tmp_path / "probe"
    module.mkdir()
    (module / "probe.py").write_text(SUBMITTED_METRIC)
    queue_file = tmp_path / "queue.sqlite"
    queue_file.write_text("the queue")
    monkeypatch.setenv("PROBE_FILE", str(queue_file))
    settings = LeaderboardSettings(db_url=f"sqlite:///{queue_file}")
    assert settings.database_files[0] == queue_file and settings.sandbox_user is None
    scored = score_submitted_metric(
        str(module),
        "smollm2-135m-instruct",
        factcheck_pairs[:2],
        time_limit_s=120,
        secrets=(),
        protected=settings.database_files,
    )
    assert list(scored.faithful) == [float(len(p.explanation_faithful)) for p in factcheck_pairs[:2]]
    # control: with the queue's folder readable, the probe sees the file and says so
    for_run = Confinement.for_run
    monkeypatch.setattr(
        Confinement,
        "for_run",
        classmethod(
            lambda cls, scratch, model, protected: cls(
                for_run(scratch, model, ()).read_only + (str(tmp_path),), (str(scratch), "/dev")
            )
        ),
    )
    control = score_submitted_metric(
        str(module), "smollm2-135m-instruct", factcheck_pairs[:1], time_limit_s=120, secrets=()
    )
    assert list(control.faithful) == [-2.0]
    monkeypatch.setattr(landlock, "abi_version", lambda: 0)
    with pytest.raises(MetricRunError, match="no Landlock"):
        score_submitted_metric(str(module), "smollm2-135m-instruct", factcheck_pairs[:1], time_limit_s=120, secrets=())


def test_the_sandbox_refuses_to_read_a_folder_that_holds_the_queue(tmp_path):
    with pytest.raises(MetricRunError, match="move the queue's database"):
        Confinement.for_run(tmp_path, "smollm2-135m-instruct", [PACKAGE_DIR / "queue.sqlite"])
    allowed = Confinement.for_run(tmp_path, "smollm2-135m-instruct", [tmp_path.parent / "elsewhere.sqlite"])
    assert str(tmp_path) in allowed.read_write and str(PACKAGE_DIR) in allowed.read_only


def nobody_can_run_python() -> bool:
    return (
        os.geteuid() == 0
        and subprocess.run(
            ["runuser", "-u", "nobody", "--", sys.executable, "-c", "pass"], capture_output=True
        ).returncode
        == 0
    )


@pytest.mark.skipif(
    not nobody_can_run_python(), reason="needs root and a Python environment that the user 'nobody' can read"
)
def test_submitted_metric_as_the_sandbox_user_cannot_open_the_apps_files(tmp_path, monkeypatch, factcheck_pairs):
    module = tmp_path / "probe"
    module.mkdir()
    (module / "probe.py").write_text(SUBMITTED_METRIC)
    queue_file = tmp_path / "queue.sqlite"
    queue_file.write_text("the queue")
    queue_file.chmod(0o600)
    monkeypatch.setenv("PROBE_FILE", str(queue_file))
    monkeypatch.setenv("CAUSALDIAG_SANDBOX_USER", "nobody")
    settings = LeaderboardSettings.from_env()
    assert settings.sandbox_user == "nobody"
    scored = score_submitted_metric(
        str(module),
        "smollm2-135m-instruct",
        factcheck_pairs[:2],
        time_limit_s=120,
        secrets=(),
        user=settings.sandbox_user,
    )
    assert list(scored.faithful) == [float(len(p.explanation_faithful)) for p in factcheck_pairs[:2]]

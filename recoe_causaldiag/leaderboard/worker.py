"""The worker: claims jobs, beats its heart while it runs them, stores each task's per-pair scores as soon as
the task is done (so a re-claimed job never redoes it), and ends each job FINISHED or FAILED with the reason."""

from __future__ import annotations

import ctypes
import logging
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api.instance import VariantScores
from ..api.rows import PairScoreRow
from ..api.run_spec import RunSpec
from ..models import verify_packaged_model
from ..packaged_models import PACKAGED_MODELS
from ..task_pairs import default_data_dir, iter_task_pairs
from .metric_sandbox import MetricRunError, host_containment, score_submitted_metric
from .queue import METRIC_JOB, Job, JobQueue, tail
from .settings import LeaderboardSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskOutcome:
    """One task of a job, evaluated: the dataset version, one row per (metric, variant, pair) and how many
    parameters the evaluated model has (None where the worker did not load it)."""

    dataset_version: str
    rows: Sequence[PairScoreRow]
    parameters: int | None = None


TaskRunner = Callable[[Job, str, Callable[[str], None]], TaskOutcome]


class JobLog:
    """The lines a job writes, thread-safe; the queue keeps their tail."""

    def __init__(self) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()

    def write(self, line: str) -> None:
        with self._lock:
            self._lines.append(f"{time.strftime('%H:%M:%S')} {line}")

    def text(self) -> str:
        with self._lock:
            return tail("\n".join(self._lines))


class LibraryTaskRunner:
    """Evaluates tasks with the library's runner (model jobs) or the metric sandbox (submitted metrics); both read
    their pairs and make their per-pair rows with the runner's functions. The board stores the evaluated direction
    only, so model jobs do not score the swapped roles (a results file from `causaldiag run` carries them).

    The last loaded model is kept, so consecutive tasks and jobs of one model load it once; the model loader
    puts it on CUDA when present. Before each task, a packaged model's converted cache is checked file by file
    against its recorded sha256 (`verify_packaged_model`); a corrupted one is rebuilt and reloaded, never scored.
    """

    def __init__(self, settings: LeaderboardSettings, data_dir: Path | None = None) -> None:
        self.settings = settings
        self.data_dir = Path(data_dir) if data_dir else default_data_dir()
        self._loaded: tuple[tuple[str, str | None, str], Any] | None = None

    def _model(self, spec: RunSpec, write: Callable[[str], None]) -> Any:
        """The model of a run spec: the loaded one when the model, revision and precision are the same."""
        from ..runner import load_run_model

        key = (spec.model, spec.revision, spec.precision)
        if self._loaded is None or self._loaded[0] != key:
            self._loaded = None
            lm = load_run_model(spec)
            self._loaded = (key, lm)
            write(f"loaded {spec.model} ({lm.dtype}) on {lm.device}")
        return self._loaded[1]

    def __call__(self, job: Job, task: str, write: Callable[[str], None]) -> TaskOutcome:
        if job.request.model in PACKAGED_MODELS and not verify_packaged_model(job.request.model):
            self._loaded = None
            write(f"the converted cache of {job.request.model} failed its sha256 check and was rebuilt")
        if job.request.kind == METRIC_JOB:
            return self._submitted_metric(job, task, write)
        from ..runner import score_run

        request = job.request
        spec = RunSpec(
            model=request.model,
            revision=request.revision,
            precision=request.precision,
            tasks=(task,),
            metrics=request.metrics,
            limit=job.pair_cap,
            editor=request.editor,
            explanations=request.explanations,
            swap=False,
        )
        lm = self._model(spec, write)
        (scores,) = score_run(spec, lm=lm, data_dir=self.data_dir, progress=False).tasks
        for result in scores.results:
            write(
                f"{task} · {result['metric']} · {result['variant']}: D = {result['diagnosticity']:.3f} "
                f"(n valid {result['n_valid']}/{result['n']})"
            )
        return TaskOutcome(scores.dataset.version, scores.rows, lm.model.num_parameters())

    def _submitted_metric(self, job: Job, task: str, write: Callable[[str], None]) -> TaskOutcome:
        if job.approved_sha256 is None:
            raise MetricRunError("the job has no approved module hash; an admin must review and approve it")
        (task_pairs,) = iter_task_pairs((task,), self.data_dir, limit=job.pair_cap, seed=0)
        write(f"{task}: scoring {len(task_pairs.pairs)} pairs with the submitted metric in an isolated process")
        write(host_containment().describe(self.settings.allow_reduced_containment))
        scored = score_submitted_metric(
            job.request.metric_source or "",
            job.request.model,
            task_pairs.pairs,
            time_limit_s=self.settings.metric_time_limit_s,
            secrets=(self.settings.db_url, self.settings.admin_token or ""),
            user=self.settings.sandbox_user,
            protected=self.settings.database_files,
            allow_reduced=self.settings.allow_reduced_containment,
            sha256=job.approved_sha256,
            revision=job.request.revision,
        )
        scores = VariantScores(scored.variant, scored.faithful, scored.unfaithful)
        return TaskOutcome(task_pairs.dataset.version, task_pairs.score_rows(job.request.metrics[0], scores))


class Worker:
    """Runs queued jobs one at a time; many workers may share one queue (each claim is atomic)."""

    def __init__(
        self, queue: JobQueue, settings: LeaderboardSettings, runner: TaskRunner | None = None, name: str | None = None
    ) -> None:
        self.queue, self.settings = queue, settings
        self.runner = runner or LibraryTaskRunner(settings)
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"

    def run_once(self) -> Job | None:
        """Re-queue stale jobs, then claim and run one job; the job as it ended, or None when none was pending."""
        for job_id in self.queue.requeue_stale(self.settings.heartbeat_timeout_s):
            log.warning("job %s lost its worker; re-queued", job_id)
        job = self.queue.claim(self.name)
        if job is None:
            return None
        self._execute(job)
        return self.queue.get(job.id)

    def run_forever(self, stop: threading.Event, poll_s: float = 2.0) -> None:
        """Run jobs until `stop`, after saying how submitted metrics are contained on this host."""
        containment = host_containment()
        level = logging.WARNING if containment.missing else logging.INFO
        log.log(level, "worker %s: %s", self.name, containment.describe(self.settings.allow_reduced_containment))
        while not stop.is_set():
            try:
                if self.run_once() is None:
                    stop.wait(poll_s)
            except Exception:  # a broken database connection must not end the worker; it retries after a pause
                log.exception("worker %s: queue error", self.name)
                stop.wait(poll_s)

    def _execute(self, job: Job) -> None:
        """Run the job's tasks in a thread of their own, for at most the settings' `job_time_limit_s`: a job past
        it is FAILED with that reason, its heart stops, its runner is interrupted (`interrupt`) and the worker
        moves on; a runner that cannot be interrupted can no longer store anything, since the job is not RUNNING."""
        job_log, lost, done_beating = JobLog(), threading.Event(), threading.Event()
        job_log.write(f"worker {self.name} claimed job {job.id} (attempt {job.attempts})")

        def beat() -> None:
            while not done_beating.wait(self.settings.heartbeat_interval_s):
                try:
                    still_ours = self.queue.heartbeat(job.id, self.name, job_log.text())
                except Exception:  # a passing database error must not stop the heart; the next beat retries
                    log.exception("worker %s: heartbeat of job %s failed", self.name, job.id)
                    continue
                if not still_ours:
                    lost.set()
                    return

        heart = threading.Thread(target=beat, name=f"heartbeat-{job.id}", daemon=True)
        ended: list[BaseException | None] = []
        runner = threading.Thread(
            target=self._run_tasks, args=(job, job_log, lost, ended), name=f"job-{job.id}", daemon=True
        )
        heart.start()
        runner.start()
        try:
            runner.join(self.settings.job_time_limit_s)
            done_beating.set()
            if runner.is_alive():
                self._time_out(job, job_log, runner)
            elif ended and ended[0] is not None:
                self._fail(job, job_log, ended[0])
        finally:
            done_beating.set()
            heart.join()

    def _run_tasks(self, job: Job, job_log: JobLog, lost: threading.Event, ended: list[BaseException | None]) -> None:
        """Run and store each task not stored yet, then finish the job; what ended it goes to `ended` (None: it
        finished or was lost to another worker)."""
        try:
            done = self.queue.done_tasks(job.id)
            for task in job.request.tasks:
                if task in done:
                    job_log.write(f"{task}: already stored, kept")
                    continue
                started = time.perf_counter()
                outcome = self.runner(job, task, job_log.write)
                seconds = time.perf_counter() - started
                if lost.is_set() or not self.queue.record_task(
                    job.id, self.name, task, outcome.dataset_version, seconds, outcome.rows, outcome.parameters
                ):
                    log.warning(
                        "worker %s lost job %s (re-queued or past its time limit); its result for %s is dropped",
                        self.name,
                        job.id,
                        task,
                    )
                    ended.append(None)
                    return
                job_log.write(f"{task}: {len(outcome.rows)} per-pair scores stored")
            self.queue.finish(job.id, self.name, job_log.text())
            ended.append(None)
        except BaseException as err:  # JobTimedOut, injected by `interrupt`, is a BaseException too
            ended.append(err)

    def _fail(self, job: Job, job_log: JobLog, err: BaseException) -> None:
        """End the job FAILED with a short, path-free public reason; the traceback goes to the server's log only."""
        reason = public_reason(err)
        log.error("job %s failed on worker %s", job.id, self.name, exc_info=err)
        job_log.write(f"failed: {reason}")
        self.queue.fail(job.id, self.name, reason, job_log.text())

    def _time_out(self, job: Job, job_log: JobLog, runner: threading.Thread) -> None:
        limit = self.settings.job_time_limit_s
        reason = f"the job exceeded its wall-clock limit of {limit} s"
        job_log.write(f"failed: {reason}")
        self.queue.fail(job.id, self.name, reason, job_log.text())
        interrupt(runner)
        runner.join(INTERRUPT_GRACE_S)
        if runner.is_alive():
            log.error(
                "job %s: its runner thread did not stop %s s after its time limit; the worker moves on, and the "
                "thread can store nothing (the job is FAILED)",
                job.id,
                INTERRUPT_GRACE_S,
            )


class JobTimedOut(BaseException):
    """Raised inside a job's runner thread when the job is past its wall-clock limit (a BaseException, so the
    `except Exception` of the code it interrupts does not swallow it)."""


INTERRUPT_GRACE_S = 10.0
"""How long the worker waits for a timed-out runner to stop before it moves on without it."""
PATH = re.compile(r"(?<![\w.~-])(?:/[^\s/:'\"]+)+/?")
PUBLIC_REASON_CHARS = 300


def interrupt(thread: threading.Thread) -> None:
    """Raise JobTimedOut in `thread` at its next Python instruction (a long native call, such as one model
    forward pass, ends first)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident or 0), ctypes.py_object(JobTimedOut))


def public_reason(err: BaseException) -> str:
    """Why a job failed, as everyone may read it: the error's kind and first line, every file path shortened to
    its last name, at most PUBLIC_REASON_CHARS characters."""
    first = (str(err).strip().splitlines() or [""])[0]
    text = PATH.sub(lambda m: Path(m.group(0)).name or "…", f"{type(err).__name__}: {first}".rstrip(": "))
    return text if len(text) <= PUBLIC_REASON_CHARS else text[: PUBLIC_REASON_CHARS - 1] + "…"


def start_worker_thread(worker: Worker, poll_s: float = 2.0) -> tuple[threading.Thread, threading.Event]:
    """The in-process worker of the default deployment: a daemon thread and the event that stops it."""
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop, poll_s), name="leaderboard-worker", daemon=True)
    thread.start()
    return thread, stop

"""The worker: claims jobs, beats its heart while it runs them, stores each task's per-pair scores as soon as
the task is done (so a re-claimed job never redoes it), and ends each job FINISHED or FAILED with the reason."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..api.instance import VariantScores
from ..api.rows import PairScoreRow
from ..api.run_spec import RunSpec
from ..task_pairs import default_data_dir, iter_task_pairs
from .metric_sandbox import score_submitted_metric
from .queue import METRIC_JOB, Job, JobQueue, tail
from .settings import LeaderboardSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskOutcome:
    """One task of a job, evaluated: the dataset version and one row per (metric, variant, pair)."""

    dataset_version: str
    rows: Sequence[PairScoreRow]


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
    puts it on CUDA when present.
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
        (scores,) = score_run(spec, lm=self._model(spec, write), data_dir=self.data_dir, progress=False).tasks
        for result in scores.results:
            write(
                f"{task} · {result['metric']} · {result['variant']}: D = {result['diagnosticity']:.3f} "
                f"(n valid {result['n_valid']}/{result['n']})"
            )
        return TaskOutcome(scores.dataset.version, scores.rows)

    def _submitted_metric(self, job: Job, task: str, write: Callable[[str], None]) -> TaskOutcome:
        (task_pairs,) = iter_task_pairs((task,), self.data_dir, limit=job.pair_cap, seed=0)
        write(f"{task}: scoring {len(task_pairs.pairs)} pairs with the submitted metric in an isolated process")
        scored = score_submitted_metric(
            job.request.metric_source or "",
            job.request.model,
            task_pairs.pairs,
            time_limit_s=self.settings.metric_time_limit_s,
            secrets=(self.settings.db_url, self.settings.admin_token or ""),
            user=self.settings.sandbox_user,
            protected=self.settings.database_files,
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
        while not stop.is_set():
            try:
                if self.run_once() is None:
                    stop.wait(poll_s)
            except Exception:  # a broken database connection must not end the worker; it retries after a pause
                log.exception("worker %s: queue error", self.name)
                stop.wait(poll_s)

    def _execute(self, job: Job) -> None:
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
        heart.start()
        try:
            done = self.queue.done_tasks(job.id)
            for task in job.request.tasks:
                if task in done:
                    job_log.write(f"{task}: already stored, kept")
                    continue
                started = time.perf_counter()
                outcome = self.runner(job, task, job_log.write)
                if lost.is_set() or not self.queue.record_task(
                    job.id, self.name, task, outcome.dataset_version, time.perf_counter() - started, outcome.rows
                ):
                    log.warning(
                        "worker %s lost job %s to another worker; its result for %s is dropped", self.name, job.id, task
                    )
                    return
                job_log.write(f"{task}: {len(outcome.rows)} per-pair scores stored")
            done_beating.set()
            self.queue.finish(job.id, self.name, job_log.text())
        except Exception as err:
            done_beating.set()
            job_log.write("".join(traceback.format_exception(err)).rstrip())
            self.queue.fail(job.id, self.name, f"{type(err).__name__}: {err}"[:2000], job_log.text())
        finally:
            done_beating.set()
            heart.join()


def start_worker_thread(worker: Worker, poll_s: float = 2.0) -> tuple[threading.Thread, threading.Event]:
    """The in-process worker of the default deployment: a daemon thread and the event that stops it."""
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(stop, poll_s), name="leaderboard-worker", daemon=True)
    thread.start()
    return thread, stop

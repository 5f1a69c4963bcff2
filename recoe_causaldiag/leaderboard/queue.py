"""The durable job queue: submit (one live job per request), claim atomically, heartbeat, store per-task
results, finish or fail, and re-queue jobs whose worker stopped beating."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import astuple, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, DateTime, Engine, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from ..api.rows import PairScoreRow
from .integrity import InvalidData, check_name, check_parameters, check_scored_rows, public_model_name, stored_row
from .schema import READ_OPTION, QueueBusy, approvals, deployment, job_tasks, jobs, make_engine, pair_scores

PENDING, RUNNING, FINISHED, FAILED = "PENDING", "RUNNING", "FINISHED", "FAILED"
AWAITING_APPROVAL = "AWAITING_APPROVAL"
STATUSES = (AWAITING_APPROVAL, PENDING, RUNNING, FINISHED, FAILED)
MODEL_JOB, METRIC_JOB = "model", "metric"
LOG_TAIL_CHARS = 4000
MAX_ATTEMPTS = 3
SUBMIT_RETRIES = 3
READ_TIMEOUT_S = 5.0


def utc_now() -> datetime:
    """Naive UTC, the one time convention of every column (SQLite keeps no time zones)."""
    return datetime.now(UTC).replace(tzinfo=None)


def iso_seconds(moment: datetime | None) -> str | None:
    """A stored (naive UTC) time as ISO 8601 to the second, as exports write it; None stays None."""
    return None if moment is None else moment.isoformat(timespec="seconds")


def tail(text: str, limit: int = LOG_TAIL_CHARS) -> str:
    return text[-limit:]


@dataclass(frozen=True)
class JobRequest:
    """What a submitter asks for: a model evaluated on tasks with metrics, or a submitted metric on a model.

    For a metric job, ``metrics`` holds the submitted metric's name and ``metric_source`` its module folder
    or Hub id. A results file imported as a finished job carries ``results_sha256``, the digest of what the file
    holds: two files that ask the same (say, two variants of one metric, or two pair counts) are two jobs, and the
    same file imported again is the same one.
    """

    kind: str
    model: str
    revision: str
    precision: str
    editor: str
    explanations: str
    tasks: tuple[str, ...]
    metrics: tuple[str, ...]
    metric_source: str | None = None
    results_sha256: str | None = None

    @property
    def key(self) -> str:
        """Identical requests share this key; task and metric order does not matter."""
        fields: dict[str, Any] = {
            "kind": self.kind,
            "model": self.model,
            "revision": self.revision,
            "precision": self.precision,
            "editor": self.editor,
            "explanations": self.explanations,
            "tasks": sorted(self.tasks),
            "metrics": sorted(self.metrics),
            "metric_source": self.metric_source,
        }
        if self.results_sha256 is not None:  # absent otherwise, so that the keys stored before it stay the same
            fields["results_sha256"] = self.results_sha256
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Job:
    """A stored job with its state; ``reason`` says why it failed, ``log_tail`` ends its log, ``approved_sha256``
    is the module hash an admin approved for a submitted metric (None otherwise, and in a page of jobs)."""

    id: int
    request: JobRequest
    pair_cap: int | None
    submitter: str
    status: str
    reason: str
    log_tail: str
    worker: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    heartbeat_at: datetime | None
    finished_at: datetime | None
    approved_sha256: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Job:
        request = JobRequest(
            row["kind"],
            row["model"],
            row["revision"],
            row["precision"],
            row["editor"],
            row["explanations"],
            _split(row["tasks"]),
            _split(row["metrics"]),
            row["metric_source"],
            row["results_sha256"],
        )
        return cls(
            row["id"],
            request,
            row["pair_cap"],
            row["submitter"],
            row["status"],
            row["reason"],
            row["log_tail"],
            row["worker"],
            row["attempts"],
            row["created_at"],
            row["started_at"],
            row["heartbeat_at"],
            row["finished_at"],
            row.get("approved_sha256"),
        )


@dataclass(frozen=True)
class FinishedScore:
    """One stored per-pair score of a finished job, with the job's model configuration, when the job was submitted
    (naive UTC) and how many parameters its model has (None where unknown or for a score that never went through a
    queue)."""

    job_id: int
    model: str
    revision: str
    precision: str
    editor: str
    explanations: str
    row: PairScoreRow
    submitted_at: datetime | None = None
    parameters: int | None = None

    @property
    def configuration(self) -> tuple[str, str, str, str, str]:
        """What distinguishes one board entry's model setting from another's."""
        return self.model, self.revision, self.precision, self.editor, self.explanations

    def to_json(self) -> dict[str, Any]:
        """The job's configuration, its submission time (ISO 8601, UTC), its model's parameter count and the row,
        flat (NaN as null; `cluster` null where the pair stands alone)."""
        return {
            "job_id": self.job_id,
            "submitted_at": iso_seconds(self.submitted_at),
            "parameters": self.parameters,
            "model": self.model,
            "revision": self.revision,
            "precision": self.precision,
            "editor": self.editor,
            "explanations": self.explanations,
            **self.row.to_json(),
            "cluster": self.row.cluster,
        }

    @property
    def cell(self) -> tuple[Any, ...]:
        """The job, configuration, task, metric and variant the score belongs to."""
        return self.job_id, *self.configuration, self.row.task, self.row.metric, self.row.variant


@dataclass(frozen=True)
class InvalidScore:
    """A stored per-pair score of a finished job that fails the checks of `integrity` (written around the queue, or
    by an older version): never scored. Its fields are the stored values as text; `reason` says what is wrong."""

    job_id: int
    model: str
    revision: str
    precision: str
    editor: str
    explanations: str
    task: str
    metric: str
    variant: str
    reason: str

    @property
    def cell(self) -> tuple[Any, ...]:
        """The job, configuration, task, metric and variant the score belongs to (as `FinishedScore.cell`): every
        field but the reason, in order."""
        return astuple(self)[:-1]


@dataclass(frozen=True)
class StoredScores:
    """The per-pair scores of the finished jobs, split into those that pass the checks and those that do not."""

    valid: list[FinishedScore]
    invalid: list[InvalidScore]


CONFIGURATION_COLUMNS = ("model", "revision", "precision", "editor", "explanations")


def _stored_score(stored: Mapping[str, Any]) -> FinishedScore | InvalidScore:
    """One stored score of a finished job, checked: a FinishedScore, or an InvalidScore that says what is wrong. A
    local model is named as the board shows it (`integrity.public_model_name`), never by its server path."""
    configuration = [stored[column] for column in CONFIGURATION_COLUMNS]
    if isinstance(configuration[0], str):
        configuration[0] = public_model_name(configuration[0])
    try:
        if not all(isinstance(value, str) for value in configuration):
            raise InvalidData("the job's model configuration is not text")
        if not isinstance(stored["created_at"], datetime):
            raise InvalidData("the job's submission time is not a time")
        parameters = check_parameters(stored["parameters"])
        return FinishedScore(stored["job_id"], *configuration, stored_row(stored), stored["created_at"], parameters)
    except InvalidData as err:
        names = (str(stored[column]) for column in ("task", "metric", "variant"))
        return InvalidScore(stored["job_id"], *map(str, configuration), *names, str(err))


class RateLimited(Exception):
    """A submitter already added `limit` jobs in the past hour; `again` (naive UTC) is when one more fits."""

    def __init__(self, limit: int, again: datetime) -> None:
        super().__init__(f"rate limit: {limit} submissions per hour per submitter; try again after {again:%H:%M} UTC")
        self.limit, self.again = limit, again


class MetricNameTaken(Exception):
    """Another submitter already submitted a metric of this name."""

    def __init__(self, metric: str) -> None:
        super().__init__(f"metric name {metric!r} belongs to another submitter; choose another name")


@dataclass(frozen=True)
class Submission:
    """The job that answers a submission; ``duplicate`` when an identical live request already had it."""

    job: Job
    duplicate: bool


@contextmanager
def _busy_is_loud() -> Iterator[None]:
    """Turn the database's "locked" error into a QueueBusy with a message a submitter can act on."""
    try:
        yield
    except OperationalError as err:
        if "locked" not in str(err) and "busy" not in str(err):
            raise
        raise QueueBusy(
            "the queue is busy (its database is locked by another process); try again in a moment"
        ) from None


QUEUE_PAGE_SIZE = 25
MAX_QUEUE_PAGE_SIZE = 200


def page_count(total: int, page_size: int) -> int:
    """How many pages of `page_size` hold `total` jobs (1 when there are none: an empty first page)."""
    return max(1, -(-total // page_size))


@dataclass(frozen=True)
class JobPage:
    """One page of the jobs that match a filter, newest first: page `page` (1-based) of `page_size` jobs, out of
    `total` matching jobs."""

    jobs: list[Job]
    page: int
    page_size: int
    total: int

    @property
    def pages(self) -> int:
        return page_count(self.total, self.page_size)


def _split(joined: str) -> tuple[str, ...]:
    return tuple(s for s in joined.split(",") if s)


class JobQueue:
    """All reads and writes of the queue database; safe to share between threads and processes."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str, read_timeout_s: float = READ_TIMEOUT_S) -> JobQueue:
        """The queue in the database at `url`; on SQLite a read waits at most `read_timeout_s` for a lock."""
        return cls(make_engine(url, read_timeout_s))

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A read-only transaction: it takes no write lock, and a lock held elsewhere for longer than the read
        timeout is a QueueBusy."""
        with _busy_is_loud(), self.engine.connect().execution_options(**{READ_OPTION: True}) as conn, conn.begin():
            yield conn

    @contextmanager
    def _writing(self) -> Iterator[Connection]:
        """A write transaction (serialised on SQLite); a lock that outlasts the write timeout is a QueueBusy."""
        with _busy_is_loud(), self.engine.begin() as conn:
            yield conn

    @property
    def claims_skip_locked(self) -> bool:
        """PostgreSQL claims with SELECT … FOR UPDATE SKIP LOCKED; SQLite serialises writers instead."""
        return self.engine.dialect.name == "postgresql"

    def now(self) -> Any:
        """The time of every queue timestamp: the database server's clock on PostgreSQL, which workers on several
        machines share; this machine's clock for SQLite, which lives on one machine (naive UTC either way)."""
        return func.timezone("UTC", func.now(), type_=DateTime) if self.claims_skip_locked else utc_now()

    def submit(
        self, request: JobRequest, submitter: str, *, pair_cap: int | None, hourly_limit: int | None = None
    ) -> Submission:
        """A job for the request, or the live one an identical request already has (never two). A request that
        failed before revives its failed job, so the tasks that job stored are kept, not redone. With
        `hourly_limit`, a new job is refused (`RateLimited`) when the submitter already added that many in the
        past hour; the count and the insert are one transaction, serialised per submitter, so concurrent
        submissions cannot pass the limit together. A submitted metric whose name another submitter already used
        raises MetricNameTaken. A metric name outside `integrity.SAFE_NAME` raises InvalidData
        before anything is written."""
        for metric in request.metrics:
            check_name("metric", metric)
        for _ in range(SUBMIT_RETRIES):
            try:
                job_id, duplicate = self._insert_or_revive(request, submitter, pair_cap, hourly_limit)
                return Submission(self.get(job_id), duplicate)
            except IntegrityError:
                live = self.live_job(request.key)
                if live is not None:
                    return Submission(live, duplicate=True)
        raise RuntimeError(f"could not submit {request.model}: the same request kept changing state")

    def _insert_or_revive(
        self, request: JobRequest, submitter: str, pair_cap: int | None, hourly_limit: int | None
    ) -> tuple[int, bool]:
        """(id, duplicate): the live job of an identical request, else a new PENDING (or AWAITING_APPROVAL) job
        or the request's revived failed job; IntegrityError when an identical request took the key meanwhile."""
        status = AWAITING_APPROVAL if request.kind == METRIC_JOB else PENDING
        with self._writing() as conn:  # SQLite: BEGIN IMMEDIATE already serialises every writer
            if self.claims_skip_locked:
                conn.execute(select(func.pg_advisory_xact_lock(func.hashtext(submitter))))
                if request.kind == METRIC_JOB:
                    conn.execute(select(func.pg_advisory_xact_lock(func.hashtext("metric:" + request.metrics[0]))))
            if request.kind == METRIC_JOB:
                self._check_owner(conn, request.metrics[0], submitter)
            live = conn.execute(select(jobs.c.id).where(jobs.c.active_key == request.key)).scalar()
            if live is not None:
                return live, True
            if hourly_limit is not None:
                self._check_rate(conn, submitter, hourly_limit)
            fresh = {
                "submitter": submitter,
                "pair_cap": pair_cap,
                "active_key": request.key,
                "status": status,
                "reason": "",
                "log_tail": "",
                "worker": None,
                "attempts": 0,
                "created_at": self.now(),
                "started_at": None,
                "heartbeat_at": None,
                "finished_at": None,
            }
            failed = conn.execute(
                select(jobs.c.id)
                .where(jobs.c.request_key == request.key, jobs.c.status == FAILED)
                .order_by(jobs.c.id.desc())
                .limit(1)
            ).scalar()
            if failed is None:
                return conn.execute(
                    insert(jobs).values(
                        kind=request.kind,
                        model=request.model,
                        revision=request.revision,
                        precision=request.precision,
                        editor=request.editor,
                        explanations=request.explanations,
                        tasks=",".join(request.tasks),
                        metrics=",".join(request.metrics),
                        metric_source=request.metric_source,
                        results_sha256=request.results_sha256,
                        request_key=request.key,
                        **fresh,
                    )
                ).inserted_primary_key[0], False
            revived = conn.execute(update(jobs).where(jobs.c.id == failed, jobs.c.status == FAILED).values(**fresh))
            if revived.rowcount != 1:  # an identical submission revived it a moment ago
                raise IntegrityError("revive", {}, Exception("the failed job was revived concurrently"))
            return failed, False

    def _check_owner(self, conn: Connection, metric: str, submitter: str) -> None:
        """A submitted metric's name belongs to whoever submitted it first: MetricNameTaken for anyone else, so
        nobody's job can replace another author's rows on the board."""
        owner = conn.execute(
            select(jobs.c.submitter)
            .where(jobs.c.kind == METRIC_JOB, jobs.c.metrics == metric)
            .order_by(jobs.c.id)
            .limit(1)
        ).scalar()
        if owner is not None and owner != submitter:
            raise MetricNameTaken(metric)

    def _check_rate(self, conn: Connection, submitter: str, hourly_limit: int) -> None:
        recent = list(
            conn.execute(
                select(jobs.c.created_at)
                .where(jobs.c.submitter == submitter, jobs.c.created_at >= self.now() - timedelta(hours=1))
                .order_by(jobs.c.created_at)
            ).scalars()
        )
        if len(recent) >= hourly_limit:
            raise RateLimited(hourly_limit, recent[-hourly_limit] + timedelta(hours=1))

    def get(self, job_id: int) -> Job:
        job = self.find(job_id)
        if job is None:
            raise LookupError(f"there is no job #{job_id}")
        return job

    def find(self, job_id: int) -> Job | None:
        """The job, with the module hash approved for it."""
        query = (
            select(jobs, approvals.c.sha256.label("approved_sha256"))
            .outerjoin(approvals, approvals.c.job_id == jobs.c.id)
            .where(jobs.c.id == job_id)
        )
        with self._reading() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else Job.from_row(row)

    def live_job(self, key: str) -> Job | None:
        """The job that holds a request key (not FAILED), if any."""
        with self._reading() as conn:
            row = conn.execute(select(jobs).where(jobs.c.active_key == key)).mappings().first()
        return None if row is None else Job.from_row(row)

    def jobs(self, submitter: str | None = None) -> list[Job]:
        """All jobs, newest first; only one submitter's when given."""
        query = select(jobs).order_by(jobs.c.id.desc())
        if submitter:
            query = query.where(jobs.c.submitter == submitter)
        with self._reading() as conn:
            return [Job.from_row(r) for r in conn.execute(query).mappings()]

    def jobs_page(
        self,
        *,
        submitter: str | None = None,
        status: str | None = None,
        page: int = 1,
        page_size: int = QUEUE_PAGE_SIZE,
    ) -> JobPage:
        """One page of the jobs, newest first; only one submitter's and/or those in one of STATUSES when given.
        A page before the first is the first, one past the end is the last, and `page_size` is kept within
        1..MAX_QUEUE_PAGE_SIZE; the count and the page are read in one transaction."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown job status; one of {', '.join(STATUSES)}")
        page_size = min(max(page_size, 1), MAX_QUEUE_PAGE_SIZE)
        matching = [jobs.c.submitter == submitter] if submitter else []
        if status is not None:
            matching.append(jobs.c.status == status)
        with self._reading() as conn:
            total = conn.execute(select(func.count()).select_from(jobs).where(*matching)).scalar_one()
            page = min(max(page, 1), page_count(total, page_size))
            query = select(jobs).where(*matching).order_by(jobs.c.id.desc()).limit(page_size)
            rows = conn.execute(query.offset((page - 1) * page_size)).mappings()
            return JobPage([Job.from_row(r) for r in rows], page, page_size, total)

    def claim(self, worker: str) -> Job | None:
        """Atomically move the oldest PENDING job to RUNNING for `worker`; None when nothing is pending."""
        while True:
            with self._writing() as conn:
                candidate = conn.execute(
                    select(jobs.c.id)
                    .where(jobs.c.status == PENDING)
                    .order_by(jobs.c.id)
                    .limit(1)
                    .with_for_update(skip_locked=True)
                ).scalar()
                if candidate is None:
                    return None
                now = self.now()
                claimed = conn.execute(
                    update(jobs)
                    .where(jobs.c.id == candidate, jobs.c.status == PENDING)
                    .values(
                        status=RUNNING, worker=worker, started_at=now, heartbeat_at=now, attempts=jobs.c.attempts + 1
                    )
                )
            if claimed.rowcount == 1:
                return self.get(candidate)

    def heartbeat(self, job_id: int, worker: str, log_tail: str) -> bool:
        """Record that `worker` still runs the job; False when the job is no longer its own (re-queued)."""
        with self._writing() as conn:
            result = conn.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.status == RUNNING)
                .values(heartbeat_at=self.now(), log_tail=tail(log_tail))
            )
        return result.rowcount == 1

    def done_tasks(self, job_id: int) -> set[str]:
        """Tasks whose scores are stored for the job: a re-claimed job never redoes them."""
        with self._reading() as conn:
            return set(conn.execute(select(job_tasks.c.task).where(job_tasks.c.job_id == job_id)).scalars())

    def record_task(
        self,
        job_id: int,
        worker: str,
        task: str,
        dataset_version: str,
        seconds: float,
        rows: Sequence[PairScoreRow],
        parameters: int | None = None,
    ) -> bool:
        """Store one task's per-pair scores (their evaluated direction) and mark the task done, in one transaction,
        only while `worker` still holds the job and the task is not stored yet; False (nothing written) otherwise.
        `parameters`, the evaluated model's parameter count where known, is recorded on the job. A row that fails
        `integrity.check_row` (or a count that is no positive integer) raises InvalidData and nothing is written."""
        checked = check_scored_rows(rows)
        counted = {} if parameters is None else {"parameters": check_parameters(parameters)}
        strays = sorted({row.task for row in checked} - {task})
        if strays:
            raise ValueError(f"rows of task(s) {', '.join(strays)} cannot be stored as task {task}")
        with self._writing() as conn:
            owned = conn.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.status == RUNNING)
                .values(heartbeat_at=self.now(), **counted)
            )
            stored = conn.execute(
                select(job_tasks.c.task).where(job_tasks.c.job_id == job_id, job_tasks.c.task == task)
            ).first()
            if owned.rowcount != 1 or stored is not None:
                return False
            if checked:
                rows_stored = [{**row.to_json(), "cluster": row.cluster, "job_id": job_id} for row in checked]
                conn.execute(insert(pair_scores), rows_stored)
            conn.execute(
                insert(job_tasks).values(
                    job_id=job_id, task=task, dataset_version=dataset_version, seconds=seconds, done_at=self.now()
                )
            )
        return True

    def finish(self, job_id: int, worker: str, log_tail: str) -> bool:
        return self._end(job_id, worker, FINISHED, "", log_tail)

    def fail(self, job_id: int, worker: str, reason: str, log_tail: str) -> bool:
        return self._end(job_id, worker, FAILED, reason, log_tail)

    def _end(self, job_id: int, worker: str, status: str, reason: str, log_tail: str) -> bool:
        values: dict[str, Any] = {
            "status": status,
            "reason": reason,
            "log_tail": tail(log_tail),
            "finished_at": self.now(),
        }
        if status == FAILED:
            values["active_key"] = None
        with self._writing() as conn:
            result = conn.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.worker == worker, jobs.c.status == RUNNING)
                .values(**values)
            )
        return result.rowcount == 1

    def requeue_stale(self, timeout_s: float) -> list[int]:
        """RUNNING jobs without a heartbeat for `timeout_s` go back to PENDING (their stored tasks are kept);
        after MAX_ATTEMPTS claims such a job fails instead."""
        cutoff = self.now() - timedelta(seconds=timeout_s)
        stale = (jobs.c.status == RUNNING) & (jobs.c.heartbeat_at < cutoff)
        with self._writing() as conn:
            ids = list(conn.execute(select(jobs.c.id).where(stale)).scalars())
            conn.execute(
                update(jobs)
                .where(stale, jobs.c.attempts >= MAX_ATTEMPTS)
                .values(
                    status=FAILED,
                    active_key=None,
                    finished_at=self.now(),
                    reason=f"its worker stopped sending heartbeats {MAX_ATTEMPTS} times",
                )
            )
            conn.execute(
                update(jobs).where(stale, jobs.c.attempts < MAX_ATTEMPTS).values(status=PENDING, worker=None, reason="")
            )
        return ids

    def approve(self, job_id: int, sha256: str) -> bool:
        """Release a submitted metric's job to the workers, recording the module hash the admin reviewed (the worker
        runs only a module with that hash)."""
        with self._writing() as conn:
            result = conn.execute(
                update(jobs).where(jobs.c.id == job_id, jobs.c.status == AWAITING_APPROVAL).values(status=PENDING)
            )
            if result.rowcount == 1:
                conn.execute(delete(approvals).where(approvals.c.job_id == job_id))
                conn.execute(insert(approvals).values(job_id=job_id, sha256=sha256, approved_at=self.now()))
        return result.rowcount == 1

    def reject(self, job_id: int, reason: str) -> bool:
        with self._writing() as conn:
            result = conn.execute(
                update(jobs)
                .where(jobs.c.id == job_id, jobs.c.status == AWAITING_APPROVAL)
                .values(status=FAILED, active_key=None, reason=reason, finished_at=self.now())
            )
        return result.rowcount == 1

    def deployment_secret(self, name: str) -> str:
        """A random secret made once per queue database, the same for every process that shares it."""
        query = select(deployment.c.value).where(deployment.c.key == name)
        for _ in range(SUBMIT_RETRIES):
            try:
                with self._writing() as conn:
                    value = conn.execute(query).scalar()
                    if value is None:
                        value = secrets.token_hex(32)
                        conn.execute(insert(deployment).values(key=name, value=value))
                    return value
            except IntegrityError:  # another process made it a moment ago
                continue
        raise RuntimeError(f"could not read the deployment secret {name!r}")

    def is_empty(self) -> bool:
        with self._reading() as conn:
            return conn.execute(select(func.count()).select_from(jobs)).scalar() == 0

    def finished_scores(self) -> list[FinishedScore]:
        """Every stored per-pair score of FINISHED jobs that passes the checks, with the job's model configuration."""
        return self.stored_scores().valid

    def stored_scores(self) -> StoredScores:
        """Every stored per-pair score of FINISHED jobs, with the job's model configuration, checked as before
        storing: a row written around the queue (a non-finite or garbage number, an unsafe name) is set apart as
        an InvalidScore instead of failing the read."""
        query = (
            select(
                jobs.c.id.label("job_id"),
                jobs.c.model,
                jobs.c.revision,
                jobs.c.precision,
                jobs.c.editor,
                jobs.c.explanations,
                jobs.c.created_at,
                jobs.c.parameters,
                pair_scores.c.task,
                pair_scores.c.metric,
                pair_scores.c.variant,
                pair_scores.c.pair_id,
                pair_scores.c.score_faithful,
                pair_scores.c.score_unfaithful,
                pair_scores.c.d,
                pair_scores.c.cluster,
            )
            .join(pair_scores, pair_scores.c.job_id == jobs.c.id)
            .where(jobs.c.status == FINISHED)
            .order_by(jobs.c.id, pair_scores.c.id)
        )
        with self._reading() as conn:
            read = [_stored_score(r) for r in conn.execute(query).mappings()]
        return StoredScores(
            [s for s in read if isinstance(s, FinishedScore)], [s for s in read if isinstance(s, InvalidScore)]
        )

    def store_finished(
        self,
        request: JobRequest,
        submitter: str,
        tasks: Iterable[tuple[str, str, Sequence[PairScoreRow]]],
        log: str,
        parameters: int | None = None,
    ) -> Submission:
        """A job that is FINISHED on arrival (a pre-computed results file), with its per-pair scores and its model's
        parameter count where known; a row that fails `integrity.check_row` (or a count that is no positive
        integer) raises InvalidData before anything is written."""
        tasks = list(tasks)
        for _, _, rows in tasks:
            check_scored_rows(rows)
        if parameters is not None:
            check_parameters(parameters)
        submission = self.submit(request, submitter, pair_cap=None)
        if submission.duplicate:
            return submission
        job_id, worker = submission.job.id, f"import:{submitter}"
        with self._writing() as conn:
            conn.execute(
                update(jobs)
                .where(jobs.c.id == job_id)
                .values(status=RUNNING, worker=worker, started_at=self.now(), heartbeat_at=self.now(), attempts=1)
            )
        for task, version, rows in tasks:
            self.record_task(job_id, worker, task, version, 0.0, rows, parameters)
        self.finish(job_id, worker, log)
        return Submission(self.get(job_id), duplicate=False)

    def finished_fingerprint(self) -> tuple[int, int]:
        """Changes whenever a job finishes (the number of finished jobs and the newest finished id)."""
        query = select(func.count(), func.coalesce(func.max(jobs.c.id), 0)).where(jobs.c.status == FINISHED)
        with self._reading() as conn:
            count, newest = conn.execute(query).one()
        return int(count), int(newest)

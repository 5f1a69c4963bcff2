"""One leaderboard deployment: the queue, its settings, the board, and the actions the Space offers."""

from __future__ import annotations

import hashlib
import hmac
import logging
import tempfile
import threading
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import staged_folder
from .board import Board, BoardCache, cell_scores
from .metric_sandbox import host_containment
from .module_source import ModuleFetchError, ModuleSource, fetch_module
from .queue import METRIC_JOB, FinishedScore, Job, JobQueue, MetricNameTaken, RateLimited, Submission
from .render import rejection_message, submission_message
from .schema import QueueUnavailable
from .seed import seed_if_empty
from .settings import LeaderboardSettings
from .validation import (
    Rejected,
    check_metric_hub_id,
    check_metric_name,
    check_submitter,
    metric_request,
    model_request,
    upload_root,
)
from .worker import Worker, public_reason, start_worker_thread

MAX_UPLOAD_BYTES = 2**20
"""The most an uploaded metric module may hold, all files together."""
MAX_ADMIN_FAILURES = 5
ADMIN_WINDOW_S = 900.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MetricUpload:
    """An uploaded `evaluate` module, checked and read but not yet written: its name, its files' names and bytes,
    and the folder under the cache it will be written to (named by its content hash)."""

    name: str
    files: tuple[tuple[str, bytes], ...]

    @classmethod
    def read(cls, name: str, paths: Sequence[Path]) -> MetricUpload:
        """The upload of `paths` as the module `name`, or Rejected: no files, over MAX_UPLOAD_BYTES together, a
        file name that is not a plain name, or no `<name>.py` among them."""
        name = check_metric_name(name)
        paths = [Path(p) for p in paths]
        if not paths:
            raise Rejected("no files were uploaded")
        if sum(p.stat().st_size for p in paths) > MAX_UPLOAD_BYTES:
            raise Rejected(f"the uploaded module is over {MAX_UPLOAD_BYTES // 1024} KiB")
        names = [p.name for p in paths]
        if any(not n or n.startswith(".") or len(n) > 100 for n in names) or len(set(names)) != len(names):
            raise Rejected("the uploaded files need distinct plain names (not hidden, at most 100 characters)")
        if f"{name}.py" not in names:
            raise Rejected(f"the uploaded module has no {name}.py (an evaluate module folder holds <name>/<name>.py)")
        return cls(name, tuple(sorted((p.name, p.read_bytes()) for p in paths)))

    @property
    def folder(self) -> Path:
        return upload_root() / ModuleSource(self.files).sha256[:16] / self.name

    def write(self) -> Path:
        """Write the module to `folder` (once a job for it was accepted)."""
        with staged_folder(self.folder) as staging:
            for file_name, content in self.files:
                (staging / file_name).write_bytes(content)
        return self.folder


class AdminGate:
    """Wrong admin tokens per client: after MAX_ADMIN_FAILURES within ADMIN_WINDOW_S, the client is locked out
    until its oldest failure leaves the window (per process: the Space's single process serves every client)."""

    def __init__(self) -> None:
        self._failures: dict[str, deque[float]] = defaultdict(deque)
        self._lock = threading.Lock()

    def _recent(self, client: str) -> deque[float]:
        failures = self._failures[client]
        while failures and failures[0] < time.monotonic() - ADMIN_WINDOW_S:
            failures.popleft()
        return failures

    def locked(self, client: str) -> bool:
        with self._lock:
            return len(self._recent(client)) >= MAX_ADMIN_FAILURES

    def failed(self, client: str) -> None:
        with self._lock:
            self._recent(client).append(time.monotonic())


@dataclass
class Leaderboard:
    """The actions of the Space; every submission answer is Markdown with user text made inert."""

    settings: LeaderboardSettings
    queue: JobQueue = field(init=False)
    boards: BoardCache = field(init=False)
    admin_gate: AdminGate = field(init=False, default_factory=AdminGate)

    def __post_init__(self) -> None:
        self.queue = JobQueue.open(self.settings.db_url, self.settings.queue_read_timeout_s)
        self.boards = BoardCache(self.queue)
        seed_if_empty(self.queue, self.settings.seed_results)

    def pseudonym(self, address: str) -> str:
        """How an anonymous submitter at `address` is stored and shown: a keyed hash (HMAC-SHA256 with this
        deployment's secret), so the address can be neither read nor recovered by hashing candidate addresses."""
        key = self.queue.deployment_secret("pseudonym_key").encode()
        return "anonymous-" + hmac.new(key, address.encode(), hashlib.sha256).hexdigest()[:10]

    def start_worker(self) -> None:
        """Run jobs in this process (the default single-machine deployment)."""
        start_worker_thread(Worker(self.queue, self.settings))

    def board(self) -> Board:
        return self.boards.get()

    def cell_scores(self, configuration: tuple, task: str, metric: str, variant: str) -> list[FinishedScore]:
        """The per-pair scores a board cell was computed from (the drill-down)."""
        return cell_scores(self.queue.stored_scores().valid, configuration, task, metric, variant)

    def containment_status(self) -> str:
        """How submitted metrics are contained on this host: every layer, or which are missing and whether the
        operator allows running them so (the Queue tab shows it)."""
        return host_containment().describe(self.settings.allow_reduced_containment)

    def _enqueue(self, build_request, submitter: str) -> Submission:
        submitter = check_submitter(submitter)
        request = build_request()
        try:
            return self.queue.submit(
                request, submitter, pair_cap=self.settings.pair_cap, hourly_limit=self.settings.rate_limit_per_hour
            )
        except (RateLimited, MetricNameTaken, QueueUnavailable) as err:
            raise Rejected(str(err)) from None

    def submit_model(
        self,
        model: str,
        revision: str,
        precision: str,
        tasks: Sequence[str],
        metrics: Sequence[str],
        submitter: str,
        editor: str = "ice",
    ) -> str:
        try:
            submission = self._enqueue(
                lambda: model_request(model, revision, precision, tasks, metrics, self.settings, editor=editor),
                submitter,
            )
        except Rejected as err:
            return rejection_message(str(err))
        return submission_message(submission.job, submission.duplicate)

    def submit_metric(
        self, name: str, hub_id: str, files: Sequence[Path], model: str, tasks: Sequence[str], submitter: str
    ) -> str:
        """Queue a submitted metric, from a Hub id (never a server path) or an uploaded module folder. Everything is
        checked, the rate limit included, before an upload is written to disk; a rejected upload leaves nothing."""
        try:
            name, hub_id = name.strip(), hub_id.strip()
            if bool(hub_id) == bool(files):
                raise Rejected("give either a Hub id or an uploaded module folder, not both and not neither")
            upload = MetricUpload.read(name, files) if files else None
            source = str(upload.folder) if upload else check_metric_hub_id(hub_id)
            submission = self._enqueue(lambda: metric_request(name, source, model, tasks, self.settings), submitter)
            if upload and not upload.folder.is_dir():
                upload.write()
        except Rejected as err:
            return rejection_message(str(err))
        note = " It runs after an admin approves it." if submission.job.status == "AWAITING_APPROVAL" else ""
        return submission_message(submission.job, submission.duplicate) + note

    def _admin(self, token: str, client: str) -> str | None:
        """None when `token` is the admin token, else why not: a client with too many wrong tokens lately is
        refused before its token is even compared. Every attempt is logged with the client."""
        if self.admin_gate.locked(client):
            log.warning("admin attempt refused: %s is locked out after too many wrong tokens", client)
            return "Rejected: too many wrong admin tokens from this client; try again later."
        expected = self.settings.admin_token
        if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
            self.admin_gate.failed(client)
            log.warning("wrong admin token from %s", client)
            return "Rejected: wrong admin token (or none is configured for this deployment)."
        log.info("admin action by %s", client)
        return None

    def _metric_job(self, job_id: int) -> Job | str:
        job = self.queue.find(int(job_id)) if 0 < int(job_id) < 2**63 else None
        if job is None:
            return f"Rejected: there is no job #{int(job_id)}."
        if job.request.kind != METRIC_JOB:
            return f"Rejected: job #{job.id} is not a submitted metric."
        return job

    def _module(self, job: Job) -> ModuleSource | str:
        """The module of a submitted metric's job as it would run now (fetched again for a Hub module)."""
        with tempfile.TemporaryDirectory(prefix="causaldiag-review-") as folder:
            try:
                return ModuleSource.read(fetch_module(job.request.metric_source or "", Path(folder)))
            except (ModuleFetchError, OSError) as err:
                return f"Rejected: the module of job #{job.id} cannot be read: {public_reason(err)}"

    def review_metric(self, job_id: int, token: str, client: str) -> str:
        """For the admin: the full source of a submitted metric's module and its sha256 (what approval records)."""
        refusal = self._admin(token, client)
        job = refusal or self._metric_job(job_id)
        if isinstance(job, str):
            return job
        module = self._module(job)
        return module if isinstance(module, str) else module.listing()

    def approve_metric(self, job_id: int, token: str, sha256: str, client: str) -> str:
        """Release a submitted metric's job to the workers, only with the deployment's admin token and the sha256
        of the module the admin reviewed (`review_metric`); the worker then runs exactly that module."""
        refusal = self._admin(token, client)
        job = refusal or self._metric_job(job_id)
        if isinstance(job, str):
            return job
        module = self._module(job)
        if isinstance(module, str):
            return module
        if module.sha256 != sha256.strip():
            return f"Rejected: job #{job.id}'s module has sha256 {module.sha256}, not the one given; review it again."
        if not self.queue.approve(job.id, module.sha256):
            return f"Rejected: job #{job.id} is {job.status}, not awaiting approval."
        return f"Approved: job #{job.id} is PENDING (module sha256 {module.sha256[:12]}…)."

"""One leaderboard deployment: the queue, its settings, the board, and the actions the Space offers."""

from __future__ import annotations

import hashlib
import hmac
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..paths import cache_root
from .board import Board, BoardCache
from .queue import METRIC_JOB, JobQueue, RateLimited, Submission
from .render import rejection_message, submission_message
from .seed import seed_if_empty
from .settings import LeaderboardSettings
from .validation import Rejected, check_metric_name, check_submitter, metric_request, model_request
from .worker import Worker, start_worker_thread


def stage_metric_upload(name: str, files: Sequence[Path]) -> Path:
    """Copy an uploaded `evaluate` module into its own folder under the cache, named by its content hash."""
    name = check_metric_name(name)
    files = [Path(f) for f in files]
    if not files:
        raise Rejected("no files were uploaded")
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.name):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    folder = cache_root().resolve() / "leaderboard" / "metrics" / digest.hexdigest()[:16] / name
    folder.mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copyfile(path, folder / path.name)
    return folder


@dataclass
class Leaderboard:
    """The actions of the Space; every submission answer is Markdown with user text made inert."""

    settings: LeaderboardSettings
    queue: JobQueue = field(init=False)
    boards: BoardCache = field(init=False)

    def __post_init__(self) -> None:
        self.queue = JobQueue.open(self.settings.db_url)
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

    def _enqueue(self, build_request, submitter: str) -> Submission:
        submitter = check_submitter(submitter)
        request = build_request()
        try:
            return self.queue.submit(
                request, submitter, pair_cap=self.settings.pair_cap, hourly_limit=self.settings.rate_limit_per_hour
            )
        except RateLimited as err:
            raise Rejected(str(err)) from None

    def submit_model(
        self, model: str, revision: str, precision: str, tasks: Sequence[str], metrics: Sequence[str], submitter: str
    ) -> str:
        try:
            submission = self._enqueue(
                lambda: model_request(model, revision, precision, tasks, metrics, self.settings), submitter
            )
        except Rejected as err:
            return rejection_message(str(err))
        return submission_message(submission.job, submission.duplicate)

    def submit_metric(
        self, name: str, hub_id: str, files: Sequence[Path], model: str, tasks: Sequence[str], submitter: str
    ) -> str:
        try:
            name = name.strip()
            if bool(hub_id.strip()) == bool(files):
                raise Rejected("give either a Hub id or an uploaded module folder, not both and not neither")
            source = hub_id.strip() or str(stage_metric_upload(name, files))
            submission = self._enqueue(lambda: metric_request(name, source, model, tasks, self.settings), submitter)
        except Rejected as err:
            return rejection_message(str(err))
        note = " It runs after an admin approves it." if submission.job.status == "AWAITING_APPROVAL" else ""
        return submission_message(submission.job, submission.duplicate) + note

    def approve_metric(self, job_id: int, token: str) -> str:
        """Release (or keep waiting) a submitted metric's job; only with the deployment's admin token."""
        expected = self.settings.admin_token
        if not expected or not hmac.compare_digest(token.encode(), expected.encode()):
            return "Rejected: wrong admin token (or none is configured for this deployment)."
        job = self.queue.find(int(job_id))
        if job is None:
            return f"Rejected: there is no job #{int(job_id)}."
        if job.request.kind != METRIC_JOB:
            return f"Rejected: job #{job.id} is not a submitted metric."
        if not self.queue.approve(job.id):
            return f"Rejected: job #{job.id} is {job.status}, not awaiting approval."
        return f"Approved: job #{job.id} is PENDING."

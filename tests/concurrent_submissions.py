"""Shared by the SQLite and PostgreSQL queue tests: one submitter's distinct requests, submitted at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from recoe_causaldiag.leaderboard.queue import MODEL_JOB, JobQueue, JobRequest, RateLimited, Submission


def submit_at_once(queue: JobQueue, submitter: str, count: int, hourly_limit: int) -> list[Submission | RateLimited]:
    """The answer to each of `count` different requests submitted from 8 threads (a refusal is an answer)."""

    def submit(i: int) -> Submission | RateLimited:
        request = JobRequest(
            MODEL_JOB, "smollm2-135m-instruct", "main", "auto", "ice", "synthetic", (f"task{i}",), ("random_baseline",)
        )
        try:
            return queue.submit(request, submitter, pair_cap=None, hourly_limit=hourly_limit)
        except RateLimited as refusal:
            return refusal

    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(submit, range(count)))

"""Deployment settings of the leaderboard, read from environment variables (one place, with defaults)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from ..paths import cache_root

DB_ENV = "CAUSALDIAG_LEADERBOARD_DB"
PAIR_CAP_ENV = "CAUSALDIAG_PAIR_CAP"
RATE_LIMIT_ENV = "CAUSALDIAG_RATE_LIMIT"
MAX_MODEL_GB_ENV = "CAUSALDIAG_MAX_MODEL_GB"
HEARTBEAT_TIMEOUT_ENV = "CAUSALDIAG_HEARTBEAT_TIMEOUT"
METRIC_TIME_LIMIT_ENV = "CAUSALDIAG_METRIC_TIME_LIMIT"
ADMIN_TOKEN_ENV = "CAUSALDIAG_ADMIN_TOKEN"
SEED_RESULTS_ENV = "CAUSALDIAG_SEED_RESULTS"
LOCAL_MODEL_ROOTS_ENV = "CAUSALDIAG_LOCAL_MODEL_ROOTS"
SANDBOX_USER_ENV = "CAUSALDIAG_SANDBOX_USER"
JOB_TIME_LIMIT_ENV = "CAUSALDIAG_JOB_TIME_LIMIT"
QUEUE_READ_TIMEOUT_ENV = "CAUSALDIAG_QUEUE_READ_TIMEOUT"
ALLOW_REDUCED_ENV = "CAUSALDIAG_ALLOW_REDUCED_CONTAINMENT"
TRUSTED_PROXIES_ENV = "CAUSALDIAG_TRUSTED_PROXIES"

SECRET_ENV_VARS = (DB_ENV, ADMIN_TOKEN_ENV, "DATABASE_URL", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def default_db_url() -> str:
    """An embedded SQLite file under the project cache folder."""
    folder = cache_root() / "leaderboard"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'queue.sqlite'}"


def _int_env(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    value = int(raw)
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {raw}")
    return value


@dataclass(frozen=True)
class LeaderboardSettings:
    """How one deployment behaves.

    ``pair_cap`` limits pairs per task of every job (None: all pairs), ``rate_limit_per_hour`` the
    submissions one submitter may make in an hour, ``max_model_gb`` the weight size accepted,
    ``heartbeat_timeout_s`` how long a RUNNING job may go without a heartbeat before it is re-queued,
    ``metric_time_limit_s`` the wall-clock limit of a submitted metric's process, ``admin_token`` the
    secret that approves submitted metrics (None: nobody can approve), ``seed_results`` results files, or folders
    of them, loaded into an empty board, ``local_model_roots`` the folders under which local model paths are accepted,
    ``sandbox_user`` the user that submitted metrics run as (None: the app's own user), ``job_time_limit_s`` the
    wall-clock limit of every job (a job past it is FAILED and the worker moves on), ``queue_read_timeout_s`` how
    long a read of a SQLite queue waits for a lock held elsewhere before it answers "queue busy",
    ``allow_reduced_containment`` whether submitted metrics run on a host that lacks some containment layer
    (`metric_sandbox.host_containment`; the queue's status names the missing ones), ``trusted_proxies`` the
    addresses whose `X-Forwarded-For` header names the client (none: every client is the address it connects
    from, so no header can make one submitter look like many).
    """

    db_url: str
    pair_cap: int | None = None
    rate_limit_per_hour: int = 5
    max_model_gb: float = 30.0
    heartbeat_timeout_s: int = 120
    metric_time_limit_s: int = 1800
    admin_token: str | None = None
    seed_results: tuple[Path, ...] = ()
    local_model_roots: tuple[Path, ...] = ()
    sandbox_user: str | None = None
    job_time_limit_s: int = 6 * 3600
    queue_read_timeout_s: float = 5.0
    allow_reduced_containment: bool = False
    trusted_proxies: tuple[str, ...] = ()

    @property
    def database_files(self) -> tuple[Path, ...]:
        """The queue's SQLite file with its journal files (none for a server database)."""
        url = make_url(self.db_url)
        if not url.drivername.startswith("sqlite") or not url.database or url.database == ":memory:":
            return ()
        path = Path(url.database).expanduser()
        return (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"))

    @property
    def heartbeat_interval_s(self) -> float:
        """Heartbeats come several times per timeout, so one late beat never re-queues a live job."""
        return max(self.heartbeat_timeout_s / 4, 0.2)

    @classmethod
    def from_env(cls) -> LeaderboardSettings:
        roots = os.environ.get(LOCAL_MODEL_ROOTS_ENV, "")
        seeds = os.environ.get(SEED_RESULTS_ENV, "")
        return cls(
            db_url=os.environ.get(DB_ENV, "").strip() or default_db_url(),
            pair_cap=_int_env(PAIR_CAP_ENV, None),
            rate_limit_per_hour=_int_env(RATE_LIMIT_ENV, 5) or 5,
            max_model_gb=float(os.environ.get(MAX_MODEL_GB_ENV, "") or 30.0),
            heartbeat_timeout_s=_int_env(HEARTBEAT_TIMEOUT_ENV, 120) or 120,
            metric_time_limit_s=_int_env(METRIC_TIME_LIMIT_ENV, 1800) or 1800,
            admin_token=os.environ.get(ADMIN_TOKEN_ENV) or None,
            seed_results=tuple(Path(p.strip()).expanduser() for p in seeds.split(os.pathsep) if p.strip()),
            local_model_roots=tuple(Path(p).expanduser() for p in roots.split(os.pathsep) if p.strip())
            or (cache_root() / "models",),
            sandbox_user=os.environ.get(SANDBOX_USER_ENV, "").strip() or None,
            job_time_limit_s=_int_env(JOB_TIME_LIMIT_ENV, 6 * 3600) or 6 * 3600,
            queue_read_timeout_s=_int_env(QUEUE_READ_TIMEOUT_ENV, 5) or 5,
            allow_reduced_containment=os.environ.get(ALLOW_REDUCED_ENV, "").strip() == "1",
            trusted_proxies=tuple(p.strip() for p in os.environ.get(TRUSTED_PROXIES_ENV, "").split(",") if p.strip()),
        )

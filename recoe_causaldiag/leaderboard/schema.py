"""The queue's tables and how a database URL becomes an engine (SQLite in WAL mode, or PostgreSQL)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
    make_url,
)

from .integrity import CLUSTER_LENGTH

metadata = MetaData()

jobs = Table(
    "jobs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("model", String(300), nullable=False),
    Column("revision", String(120), nullable=False),
    Column("precision", String(16), nullable=False),
    Column("editor", String(16), nullable=False),
    Column("explanations", String(16), nullable=False),
    Column("tasks", Text, nullable=False),
    Column("metrics", Text, nullable=False),
    Column("metric_source", Text),
    Column("results_sha256", String(64)),
    Column("pair_cap", Integer),
    Column("submitter", String(200), nullable=False, index=True),
    Column("request_key", String(64), nullable=False, index=True),
    # Equal to request_key while the job is live or finished; cleared when it fails, so a failed request can be
    # submitted again while the unique constraint still allows exactly one live job per request.
    Column("active_key", String(64), unique=True),
    Column("status", String(24), nullable=False, index=True),
    Column("reason", Text, nullable=False, default=""),
    Column("log_tail", Text, nullable=False, default=""),
    Column("worker", String(200)),
    Column("attempts", Integer, nullable=False, default=0),
    Column("created_at", DateTime, nullable=False),
    Column("started_at", DateTime),
    Column("heartbeat_at", DateTime),
    Column("finished_at", DateTime),
    Column("parameters", BigInteger),
)

job_tasks = Table(
    "job_tasks",
    metadata,
    Column("job_id", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("task", String(64), primary_key=True),
    Column("dataset_version", String(32), nullable=False),
    Column("seconds", Float, nullable=False),
    Column("done_at", DateTime, nullable=False),
)

pair_scores = Table(
    "pair_scores",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("task", String(64), nullable=False),
    Column("metric", String(120), nullable=False),
    Column("variant", String(120), nullable=False),
    Column("pair_id", String(120), nullable=False),
    Column("score_faithful", Float),
    Column("score_unfaithful", Float),
    Column("d", Float),
    Column("cluster", String(CLUSTER_LENGTH)),
    UniqueConstraint("job_id", "task", "metric", "variant", "pair_id"),
)


approvals = Table(
    "approvals",
    metadata,
    Column("job_id", Integer, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("sha256", String(64), nullable=False),
    Column("approved_at", DateTime, nullable=False),
)
"""The module hash an admin approved for a submitted metric's job: the worker runs that module only."""

deployment = Table(
    "deployment",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)


READ_OPTION = "queue_read"
"""Execution option of a connection that only reads: on SQLite it begins a deferred transaction, which takes no
write lock, and waits at most the engine's read timeout for a lock held elsewhere."""
WRITE_BUSY_TIMEOUT_MS = 60000


class QueueUnavailable(RuntimeError):
    """The queue's database cannot be used: its file was removed or replaced while the app ran (a write would go
    to a deleted file and be lost), or it is locked for longer than a read may wait (`QueueBusy`)."""


class QueueBusy(QueueUnavailable):
    """The queue's database was locked for longer than the read timeout: try again in a moment."""


@dataclass(frozen=True)
class DatabaseFile:
    """The identity (device, inode) of the SQLite file an engine opened; every transaction checks it first."""

    path: Path
    identity: tuple[int, int]

    @classmethod
    def of(cls, path: Path) -> DatabaseFile:
        stat = path.stat()
        return cls(path, (stat.st_dev, stat.st_ino))

    def check(self) -> None:
        """Raise QueueUnavailable when the file is gone or is another file now."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            raise QueueUnavailable(
                "the queue's database file was removed while the app ran; it accepts no work until it is restarted"
            ) from None
        if (stat.st_dev, stat.st_ino) != self.identity:
            raise QueueUnavailable(
                "the queue's database file was replaced while the app ran; it accepts no work until it is restarted"
            )


def _sqlite_pragmas(read_timeout_s: float):
    """The settings of every new SQLite connection; it waits at most `read_timeout_s` for a lock while it sets
    them (a writer's transaction waits longer, `_sqlite_begin`)."""

    def connect(dbapi_connection, _record) -> None:
        # Autocommit at the driver level so that every SQLAlchemy transaction starts with the BEGIN chosen in
        # `_sqlite_begin`: writers queue on busy_timeout instead of failing when a read snapshot turns stale.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for pragma in (
            f"busy_timeout={int(read_timeout_s * 1000)}",
            "journal_mode=WAL",
            "foreign_keys=ON",
            "synchronous=NORMAL",
        ):
            cursor.execute(f"PRAGMA {pragma}")
        cursor.close()

    return connect


def _sqlite_begin(database: DatabaseFile, read_timeout_s: float):
    """The BEGIN of every SQLite transaction, after checking the file is still the one opened: a reader's is
    deferred (no write lock) and waits at most `read_timeout_s` for a lock; a writer's is IMMEDIATE."""
    read_ms = int(read_timeout_s * 1000)

    def begin(conn: Connection) -> None:
        database.check()
        if conn.get_execution_options().get(READ_OPTION):
            conn.exec_driver_sql(f"PRAGMA busy_timeout={read_ms}")
            conn.exec_driver_sql("BEGIN")
        else:
            conn.exec_driver_sql(f"PRAGMA busy_timeout={WRITE_BUSY_TIMEOUT_MS}")
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return begin


SCHEMA_REVISION = "0004"
"""The newest migration in `migrations/versions/`: what `migrate` brings every database to."""
PRE_MIGRATIONS_REVISION = "0001"
"""The revision whose tables a database made before migrations existed holds (it is stamped with it)."""
_MIGRATION_LOCK = 7_310_531_117
"""PostgreSQL advisory lock held while migrating, so that processes opening one database at once migrate it once."""


def schema_revision(connection: Connection) -> str | None:
    """The migration revision a database is at; None for one that never ran a migration."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.exec_driver_sql("SELECT version_num FROM alembic_version").scalar()


def alembic_config(connection: Connection) -> Any:
    """The Alembic configuration of the queue's migrations, run on `connection`."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).with_name("migrations")))
    config.attributes["connection"] = connection
    return config


def migrate(engine: Engine) -> None:
    """Bring the database to `SCHEMA_REVISION` with the migrations in `migrations/` (Alembic): a new database gets
    every table, one made before migrations existed is stamped with the revision its tables match, then upgraded.
    One already at the newest revision costs one query."""
    with engine.connect().execution_options(**{READ_OPTION: True}) as connection:
        if schema_revision(connection) == SCHEMA_REVISION:
            return
    from alembic import command

    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})")
        config = alembic_config(connection)
        if schema_revision(connection) is None and inspect(connection).has_table("jobs"):
            command.stamp(config, PRE_MIGRATIONS_REVISION)
        command.upgrade(config, "head")


def make_engine(url: str, read_timeout_s: float = 5.0) -> Engine:
    """An engine for a SQLite or PostgreSQL URL, its database migrated to the newest schema (`migrate`); a SQLite
    engine refuses every transaction once its file is removed or replaced (`DatabaseFile`)."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    engine = create_engine(url, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas(read_timeout_s))
        with engine.connect():  # makes the file, so that its identity can be taken
            pass
        database = make_url(url).database
        if not database or database == ":memory:":
            raise ValueError("the queue needs a SQLite file (an in-memory database is lost with its connection)")
        event.listen(engine, "begin", _sqlite_begin(DatabaseFile.of(Path(database).expanduser()), read_timeout_s))
    migrate(engine)
    return engine

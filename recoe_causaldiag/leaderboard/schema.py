"""The queue's tables and how a database URL becomes an engine (SQLite in WAL mode, or PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import (
    Column,
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
)

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
    UniqueConstraint("job_id", "task", "metric", "variant", "pair_id"),
)


deployment = Table(
    "deployment",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    # Autocommit at the driver level so that every SQLAlchemy transaction starts with BEGIN IMMEDIATE below:
    # writers then queue on busy_timeout instead of failing when a read snapshot turns stale under WAL.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in ("journal_mode=WAL", "busy_timeout=60000", "foreign_keys=ON", "synchronous=NORMAL"):
        cursor.execute(f"PRAGMA {pragma}")
    cursor.close()


def make_engine(url: str) -> Engine:
    """An engine for a SQLite or PostgreSQL URL, with the tables created if missing."""
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    engine = create_engine(url, pool_pre_ping=True)
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
    metadata.create_all(engine)
    return engine

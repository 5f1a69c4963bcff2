"""The queue's schema goes through Alembic migrations: a new database gets exactly the tables the code declares,
and a database made by the previous schema (release 0.2.0, before migrations) is upgraded in place with its jobs
and scores kept."""

from __future__ import annotations

from dataclasses import replace

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.leaderboard import schema
from recoe_causaldiag.leaderboard.queue import MODEL_JOB, JobQueue, JobRequest
from recoe_causaldiag.leaderboard.schema import SCHEMA_REVISION, make_engine, metadata, schema_revision


def request(model: str) -> JobRequest:
    return JobRequest(MODEL_JOB, model, "main", "auto", "ice", "synthetic", ("factcheck",), ("random_baseline",))


def stored_then_taken_back(url: str, revision: str, *, stamped: bool, rows: list[PairScoreRow]) -> int:
    """A database as an earlier release left it, holding one finished job with `rows`: stored by today's queue,
    then migrated down to `revision` (and, for a release before migrations, without the version table). The job's
    id."""
    queue = JobQueue.open(url)
    job = queue.store_finished(request("m"), "results file", [("factcheck", "1.3.0", rows)], "imported").job
    with queue.engine.begin() as connection:
        command.downgrade(schema.alembic_config(connection), revision)
        if not stamped:
            connection.exec_driver_sql("DROP TABLE alembic_version")
    queue.engine.dispose()
    return job.id


def test_a_new_database_is_migrated_to_exactly_the_declared_schema(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'q.sqlite'}")
    with engine.connect() as connection:
        assert schema_revision(connection) == SCHEMA_REVISION
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []


def columns_and_revision(url: str) -> tuple[set[str], str | None]:
    """The jobs table's columns and the migration revision of a database, read without migrating it."""
    engine = create_engine(url)
    with engine.connect() as connection:
        found = {c["name"] for c in inspect(connection).get_columns("jobs")}, schema_revision(connection)
    engine.dispose()
    return found


def test_a_database_of_the_previous_schema_is_upgraded_with_its_jobs_kept(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    rows = [PairScoreRow(f"p{i}", "factcheck", "random_baseline", "v", 1.0, 0.0, 1.0) for i in range(3)]
    job_id = stored_then_taken_back(url, "0001", stamped=False, rows=rows)  # release 0.2.0 had no migrations
    columns, revision = columns_and_revision(url)
    assert revision is None and "parameters" not in columns and "finished_at" in columns

    upgraded = JobQueue.open(url)
    with upgraded.engine.connect() as connection:
        assert schema_revision(connection) == SCHEMA_REVISION
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    assert [s.row for s in upgraded.finished_scores()] == rows and [j.id for j in upgraded.jobs()] == [job_id]
    assert upgraded.submit(request("m2"), "alice", pair_cap=None).job.id == job_id + 1


def test_a_database_of_revision_0001_gains_the_parameter_count_with_its_jobs_kept(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.sqlite'}"
    rows = [PairScoreRow(f"p{i}", "factcheck", "random_baseline", "v", 1.0, 0.0, 1.0) for i in range(3)]
    job_id = stored_then_taken_back(url, "0001", stamped=True, rows=rows)
    columns, revision = columns_and_revision(url)
    assert revision == "0001" and "parameters" not in columns

    upgraded = JobQueue.open(url)
    with upgraded.engine.connect() as connection:
        assert schema_revision(connection) == SCHEMA_REVISION == "0004"
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    scores = upgraded.finished_scores()
    assert [s.row for s in scores] == rows and {(s.job_id, s.parameters) for s in scores} == {(job_id, None)}
    again = upgraded.store_finished(request("m2"), "results file", [("factcheck", "1.4.0", rows)], "", 134_515_008)
    assert {s.parameters for s in upgraded.finished_scores() if s.job_id == again.job.id} == {134_515_008}


def test_a_database_of_revision_0002_gains_the_results_digest_and_its_jobs_keep_their_keys(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.sqlite'}"
    rows = [PairScoreRow(f"p{i}", "factcheck", "random_baseline", "v", 1.0, 0.0, 1.0) for i in range(3)]
    job_id = stored_then_taken_back(url, "0002", stamped=True, rows=rows)
    columns, revision = columns_and_revision(url)
    assert revision == "0002" and "parameters" in columns and "results_sha256" not in columns

    upgraded = JobQueue.open(url)
    with upgraded.engine.connect() as connection:
        assert schema_revision(connection) == SCHEMA_REVISION
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    (job,) = upgraded.jobs()
    assert (
        job.id == job_id and job.request.results_sha256 is None and [s.row for s in upgraded.finished_scores()] == rows
    )
    assert upgraded.submit(request("m"), "alice", pair_cap=None).duplicate, "a stored job's key is unchanged"
    digest = "ab" * 32
    imported = upgraded.store_finished(
        replace(request("m"), results_sha256=digest), "file", [("factcheck", "1.4.0", rows)], ""
    )
    assert not imported.duplicate and upgraded.get(imported.job.id).request.results_sha256 == digest


def test_a_database_of_revision_0003_gains_the_pair_clusters_with_its_scores_kept(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.sqlite'}"
    rows = [PairScoreRow(f"p{i}", "factcheck", "random_baseline", "v", 1.0, 0.0, 1.0) for i in range(3)]
    job_id = stored_then_taken_back(url, "0003", stamped=True, rows=rows)
    engine = create_engine(url)
    with engine.connect() as connection:
        assert "cluster" not in {c["name"] for c in inspect(connection).get_columns("pair_scores")}
    engine.dispose()

    upgraded = JobQueue.open(url)
    with upgraded.engine.connect() as connection:
        assert schema_revision(connection) == SCHEMA_REVISION
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    assert [(s.job_id, s.row) for s in upgraded.finished_scores()] == [(job_id, row) for row in rows]
    clustered = [replace(row, cluster="Lou Gehrig") for row in rows]
    again = upgraded.store_finished(request("m2"), "results file", [("factcheck", "1.4.0", clustered)], "")
    assert [s.row for s in upgraded.finished_scores() if s.job_id == again.job.id] == clustered

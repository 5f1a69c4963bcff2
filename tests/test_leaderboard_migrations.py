"""The queue's schema goes through Alembic migrations: a new database gets exactly the tables the code declares,
and a database made by the previous schema (release 0.2.0, before migrations) is upgraded in place with its jobs
and scores kept."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from recoe_causaldiag.api.rows import PairScoreRow
from recoe_causaldiag.leaderboard import schema
from recoe_causaldiag.leaderboard.queue import MODEL_JOB, JobQueue, JobRequest
from recoe_causaldiag.leaderboard.schema import SCHEMA_REVISION, make_engine, metadata, schema_revision


def request(model: str) -> JobRequest:
    return JobRequest(MODEL_JOB, model, "main", "auto", "ice", "synthetic", ("factcheck",), ("random_baseline",))


def test_a_new_database_is_migrated_to_exactly_the_declared_schema(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'q.sqlite'}")
    with engine.connect() as connection:
        assert schema_revision(connection) == SCHEMA_REVISION
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []


def test_a_database_of_the_previous_schema_is_upgraded_with_its_jobs_kept(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    rows = [PairScoreRow(f"p{i}", "factcheck", "random_baseline", "v", 1.0, 0.0, 1.0) for i in range(3)]
    with monkeypatch.context() as previous_release:  # release 0.2.0 made its tables on start, with no migrations
        previous_release.setattr(schema, "migrate", metadata.create_all)
        before = JobQueue.open(url)
        job = before.store_finished(request("m"), "results file", [("factcheck", "1.3.0", rows)], "imported").job
        with before.engine.connect() as connection:
            assert schema_revision(connection) is None
        before.engine.dispose()

    upgraded = JobQueue.open(url)
    with upgraded.engine.connect() as connection:
        assert schema_revision(connection) == SCHEMA_REVISION
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    assert [s.row for s in upgraded.finished_scores()] == rows and [j.id for j in upgraded.jobs()] == [job.id]
    assert upgraded.submit(request("m2"), "alice", pair_cap=None).job.id == job.id + 1

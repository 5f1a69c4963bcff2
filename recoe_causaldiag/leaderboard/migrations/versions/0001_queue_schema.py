"""The queue's schema as of release 0.2.0: jobs, their finished tasks, per-pair scores, metric approvals and the
deployment's secrets. A database made before migrations existed has exactly these tables and is stamped with this
revision.

Revision ID: 0001
Revises:
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("model", sa.String(300), nullable=False),
        sa.Column("revision", sa.String(120), nullable=False),
        sa.Column("precision", sa.String(16), nullable=False),
        sa.Column("editor", sa.String(16), nullable=False),
        sa.Column("explanations", sa.String(16), nullable=False),
        sa.Column("tasks", sa.Text, nullable=False),
        sa.Column("metrics", sa.Text, nullable=False),
        sa.Column("metric_source", sa.Text),
        sa.Column("pair_cap", sa.Integer),
        sa.Column("submitter", sa.String(200), nullable=False, index=True),
        sa.Column("request_key", sa.String(64), nullable=False, index=True),
        sa.Column("active_key", sa.String(64), unique=True),
        sa.Column("status", sa.String(24), nullable=False, index=True),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("log_tail", sa.Text, nullable=False),
        sa.Column("worker", sa.String(200)),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("started_at", sa.DateTime),
        sa.Column("heartbeat_at", sa.DateTime),
        sa.Column("finished_at", sa.DateTime),
    )
    op.create_table(
        "job_tasks",
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("task", sa.String(64), primary_key=True),
        sa.Column("dataset_version", sa.String(32), nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("done_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "pair_scores",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True),
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("metric", sa.String(120), nullable=False),
        sa.Column("variant", sa.String(120), nullable=False),
        sa.Column("pair_id", sa.String(120), nullable=False),
        sa.Column("score_faithful", sa.Float),
        sa.Column("score_unfaithful", sa.Float),
        sa.Column("d", sa.Float),
        sa.UniqueConstraint("job_id", "task", "metric", "variant", "pair_id"),
    )
    op.create_table(
        "approvals",
        sa.Column("job_id", sa.Integer, sa.ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("approved_at", sa.DateTime, nullable=False),
    )
    op.create_table(
        "deployment",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for table in ("deployment", "approvals", "pair_scores", "job_tasks", "jobs"):
        op.drop_table(table)

"""A job imported from a results file records the digest of what the file holds, which is part of its request key:
two files of one model, tasks and metrics (two variants, two pair counts) are two jobs (null for every job stored
before this revision and for every submitted job).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("results_sha256", sa.String(64)))


def downgrade() -> None:
    # In place (SQLite 3.35 on, PostgreSQL): a batch rebuild of `jobs` would cascade to its scores.
    op.execute("ALTER TABLE jobs DROP COLUMN results_sha256")

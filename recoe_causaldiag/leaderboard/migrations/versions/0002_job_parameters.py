"""Each job records how many parameters the evaluated model has (the board's model size; null where unknown: jobs
stored before this revision, submitted-metric jobs and results files written before results schema 1.6).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("parameters", sa.BigInteger))


def downgrade() -> None:
    # In place (SQLite 3.35 on, PostgreSQL): a batch rebuild of `jobs` would cascade to its scores.
    op.execute("ALTER TABLE jobs DROP COLUMN parameters")

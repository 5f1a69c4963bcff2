"""A stored per-pair score names its pair's cluster (the entity it shares with other pairs of its dataset), so that
the board resamples and sign-tests such pairs together, as the run did (null for every score stored before this
revision, and where the dataset names none: such a pair stands alone).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("pair_scores", sa.Column("cluster", sa.String(200)))


def downgrade() -> None:
    op.execute("ALTER TABLE pair_scores DROP COLUMN cluster")

"""The commit times live in `latest_commits` only: `latest_group_offsets.last_commit_observed_at`
held a copy of each group-partition's newest observed commit time, moved there by a second write
of every commit under the cluster's lock of those rows. Readers take `latest_commits.observed_at`
now; a time only the copy held is kept in `latest_commits` first.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0039"
down_revision: str | Sequence[str] | None = "0038"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute(
        """
        INSERT INTO latest_commits AS c (cluster, group_id, topic, partition, committed_offset, observed_at)
        SELECT cluster, group_id, topic, partition, committed_offset, last_commit_observed_at
        FROM latest_group_offsets
        WHERE last_commit_observed_at IS NOT NULL AND committed_offset IS NOT NULL
        ON CONFLICT (cluster, group_id, topic, partition) DO UPDATE SET
            committed_offset = excluded.committed_offset, observed_at = excluded.observed_at
        WHERE c.observed_at < excluded.observed_at
        """
    )
    op.drop_column("latest_group_offsets", "last_commit_observed_at")


def downgrade() -> None:
    op.add_column(
        "latest_group_offsets",
        sa.Column("last_commit_observed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.execute(
        """
        UPDATE latest_group_offsets AS l SET last_commit_observed_at = c.observed_at
        FROM latest_commits AS c
        WHERE c.cluster = l.cluster AND c.group_id = l.group_id AND c.topic = l.topic
          AND c.partition = l.partition
        """
    )

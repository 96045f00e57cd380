"""latest_group_offsets' (cluster, topic, partition) index: the groups reading a few topics
(the lagging groups counted on a topic's page and on a page of the list of topics) are a range
of it, not a pass over the cluster's group-partitions.

Revision ID: 0033
Revises: 0032
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0033"
down_revision: str | Sequence[str] | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_latest_group_offsets_cluster_topic", "latest_group_offsets", ["cluster", "topic", "partition"]
    )


def downgrade() -> None:
    op.drop_index("ix_latest_group_offsets_cluster_topic", table_name="latest_group_offsets")

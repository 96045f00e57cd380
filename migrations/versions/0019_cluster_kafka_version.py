"""`clusters.kafka_version`: the Kafka release ("3.9") of the cluster's oldest live broker, from
the ApiVersions its brokers answer, written by each metadata run; null until a broker was
identified.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("clusters", sa.Column("kafka_version", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("clusters", "kafka_version")

"""An index on `findings (cluster, evaluated_at)`: when a cluster's findings last changed is one
index lookup (`monitor.store.versions.cluster_version`), however many resolved findings the
table keeps. Every change of a finding (matched again, new, resolved) sets its `evaluated_at`.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_findings_cluster_evaluated_at"


def upgrade() -> None:
    op.create_index(INDEX, "findings", ["cluster", "evaluated_at"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="findings")

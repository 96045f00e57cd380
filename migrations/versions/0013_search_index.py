"""The topic search's index: a trigram GIN index on `topics.topic` (the `pg_trgm` extension), so
that a search for a name fragment (`LIKE '%fragment%'`, which no btree index serves) reads the
index instead of every topic of every cluster.

The extension comes with PostgreSQL's contrib modules (Debian's `postgresql-15` package ships
them) and is trusted: the database's owner may create it; without it the upgrade stops with an
error that says what to do. The downgrade drops the index and leaves the extension, which other
schemas of the database may use.

Consumer groups need no such index: a group search reads the groups of one evaluation, which the
`(cluster, evaluated_at)` index of `derived_group` finds; a trigram index over every evaluation's
rows would match each group once per evaluation kept.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEX = "ix_topics_topic_trgm"

_CREATE_EXTENSION = """
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION
    WHEN undefined_file THEN
        RAISE EXCEPTION 'the topic search index needs the pg_trgm extension, which this PostgreSQL '
                        'server does not have: install its contrib modules (the postgresql-contrib '
                        'package, or postgresql-15 on Debian 12) and run the upgrade again';
    WHEN insufficient_privilege THEN
        RAISE EXCEPTION 'the topic search index needs the pg_trgm extension, and this user may not '
                        'create it: ask the database owner or a superuser to run '
                        '"CREATE EXTENSION pg_trgm;" in database %, then run the upgrade again',
                        current_database();
END
$$;
"""


def upgrade() -> None:
    op.execute(_CREATE_EXTENSION)
    op.create_index(
        INDEX, "topics", ["topic"], postgresql_using="gin", postgresql_ops={"topic": "gin_trgm_ops"}
    )


def downgrade() -> None:
    op.drop_index(INDEX, table_name="topics")

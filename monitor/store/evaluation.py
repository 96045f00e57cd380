"""Tables written by the evaluate stage: one `derived_<entity>` table per entity of the derived
columns contract (`monitor.core.derived`), partitioned by day on `evaluated_at`, and
`findings`, the rules' verdicts with their lifecycle (pending -> firing -> resolved).

The derived tables are generated from the contract so that the columns a rule can use, the
columns the transforms produce and the columns stored can never disagree; the migration that
created them is frozen text, and a test compares it with this metadata.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Connection,
    DateTime,
    Double,
    Index,
    Integer,
    Table,
    Text,
    delete,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, insert
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeEngine

from monitor.core.derived import ENTITIES, KEYS, table_of
from monitor.core.vocabulary import ALERT_STATES, RESOLVE_REASONS
from monitor.store.base import PARTITION_COLUMN_KEY, Base, one_of

_TYPES: dict[str, TypeEngine[Any]] = {
    "string": Text(),
    "int": Integer(),
    "bigint": BigInteger(),
    "double": Double(),
    "boolean": Boolean(),
    "timestamp": DateTime(timezone=True),
}


def _lookup_indexes(entity: str) -> list[Index]:
    """(cluster, group_id, evaluated_at) (or the first key where there is no group) on a derived
    table whose primary key puts other keys between that key and the evaluation: one group's rows
    of an evaluation, or of the last hour, are then a range of it however many evaluations the
    table keeps. (The primary key, (cluster, group_id, topic, partition, evaluated_at), holds the
    group's rows of every evaluation kept, 2,880 a day at the default interval; the (cluster,
    evaluated_at) index every group's rows of an evaluation.) No index where the primary key already
    is (cluster, key, evaluated_at) or the entity has no key."""
    keys = KEYS[entity]
    if len(keys) < 2:
        return []
    key = "group_id" if "group_id" in keys else keys[0]
    return [Index(f"ix_{table_of(entity)}_cluster_{key}_evaluated_at", "cluster", key, "evaluated_at")]


def _derived_table(entity: str) -> Table:
    keys = KEYS[entity]
    columns = [
        Column("cluster", Text(), primary_key=True),
        *(
            Column(c.name, _TYPES[c.type], primary_key=c.name in keys, nullable=c.name not in keys)
            for c in ENTITIES[entity]
        ),
        Column("evaluated_at", DateTime(timezone=True), primary_key=True),
    ]
    return Table(
        table_of(entity),
        Base.metadata,
        *columns,
        Index(f"ix_{table_of(entity)}_cluster_evaluated_at", "cluster", "evaluated_at"),
        *_lookup_indexes(entity),
        postgresql_partition_by="RANGE (evaluated_at)",
        info={PARTITION_COLUMN_KEY: "evaluated_at"},
    )


DERIVED_TABLES: dict[str, Table] = {entity: _derived_table(entity) for entity in ENTITIES}


class Finding(Base):
    """A rule matching an entity. One open row per (rule, entity_key); a resolved row is history."""

    __tablename__ = "findings"
    __table_args__ = (
        CheckConstraint(one_of("state", ALERT_STATES), name="state"),
        CheckConstraint(one_of("resolved_reason", RESOLVE_REASONS), name="resolved_reason"),
        Index(
            "uq_findings_open",
            "rule",
            "entity_key",
            unique=True,
            postgresql_where=text("state <> 'resolved'"),
        ),
        Index("ix_findings_cluster_last_seen", "cluster", "last_seen"),
        Index("ix_findings_cluster_evaluated_at", "cluster", "evaluated_at"),
        Index("ix_findings_state", "state"),
        Index("ix_findings_resolved_at", "resolved_at", postgresql_where=text("state = 'resolved'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=True)
    rule: Mapped[str]
    entity: Mapped[str]
    entity_key: Mapped[str]
    cluster: Mapped[str]
    labels: Mapped[dict[str, Any]] = mapped_column(JSONB)
    severity: Mapped[str]
    value: Mapped[float | None] = mapped_column(Double)
    summary: Mapped[str]
    description: Mapped[str]
    annotations: Mapped[dict[str, str]] = mapped_column(JSONB, server_default=text("'{}'::jsonb"))
    """Name -> text: the rule's annotations rendered for it (`monitor.core.annotations`)."""
    for_seconds: Mapped[int]
    state: Mapped[str]
    first_seen: Mapped[datetime]
    last_seen: Mapped[datetime]
    resolved_at: Mapped[datetime | None]
    evaluated_at: Mapped[datetime]
    resolved_reason: Mapped[str | None]
    """`gone` (vocabulary.RESOLVE_REASONS) when it resolved because the cluster no longer has its
    entity; None otherwise."""


class EvaluationClock(Base):
    """ "Now" of one prepared evaluation plan (monitor.evaluate.plan): the evaluation job reads its
    window and its `evaluated_at` from this row, so that a plan built once runs at any time. One
    row per plan, replaced before each of its evaluations; `touched_at` lets rows of plans that
    are gone (a stopped daemon, a finished spark-submit run) be removed."""

    __tablename__ = "evaluation_clocks"

    plan_id: Mapped[str] = mapped_column(Text, primary_key=True)
    evaluated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    touched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=text("now()"))
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    """The plan's last evaluation that wrote all its rows (store.carry): the next one may carry
    groups from it."""


CLOCKS_KEPT_FOR = "1 day"
"""A plan's clock row untouched this long belongs to a plan that is gone: it is removed."""


def latest_rows(entity: str) -> str:
    """The rows of the derived entity `entity` from the newest evaluation of their cluster, as a
    subquery to alias: what the `*_lag` views show, with every column the entity's table has now
    (a view keeps the columns it was created with)."""
    return (
        f"(SELECT d.* FROM {table_of(entity)} d JOIN latest_evaluations l"
        " ON l.cluster = d.cluster AND l.evaluated_at = d.evaluated_at)"
    )


def set_clock(conn: Connection, plan_id: str, evaluated_at: datetime) -> None:
    """Set the time the plan `plan_id` evaluates at next (and drop the rows of plans gone)."""
    statement = insert(EvaluationClock).values(plan_id=plan_id, evaluated_at=evaluated_at)
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[EvaluationClock.plan_id],
            set_={"evaluated_at": statement.excluded.evaluated_at, "touched_at": func.now()},
        )
    )
    stale = EvaluationClock.touched_at < func.now() - text(f"interval '{CLOCKS_KEPT_FOR}'")
    conn.execute(delete(EvaluationClock).where(stale))


def drop_clocks(conn: Connection, plan_ids: Collection[str]) -> None:
    """Remove the clocks of plans that will not run again."""
    if plan_ids:
        conn.execute(delete(EvaluationClock).where(EvaluationClock.plan_id.in_(list(plan_ids))))


def fleet_rows(conn: Connection, clusters: Collection[str]) -> int:
    """The group-partitions (with a committed offset the cluster still has) and the partitions
    the store holds of `clusters`: the rows an evaluation reads, to size the Spark driver by."""
    return int(
        conn.execute(
            text(
                "SELECT (SELECT count(*) FROM latest_group_offsets"
                "        WHERE cluster = ANY(:c) AND gone_at IS NULL)"
                "     + (SELECT count(*) FROM latest_partition_offsets WHERE cluster = ANY(:c))"
            ),
            {"c": list(clusters)},
        ).scalar_one()
    )

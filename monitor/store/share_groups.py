"""Share groups (KIP-932): their tables (written by `monitor.store.samples.share_groups`).

- ``share_group_states`` and ``share_group_offsets``: samples, partitioned by day like the other
  sample tables and dropped past retention: each group's state and member count, and each share
  partition's start offset (SPSO), end offset and lag with how it was known (`lag_method`);
- ``share_group_members``: the current members of each group and their assignments;
- ``share_group_support``: one row per cluster: whether it has share groups to give (with the
  reason when not) and when it was last sampled, which is also the newest sample the views read.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, CheckConstraint, Index
from sqlalchemy.orm import Mapped, mapped_column

from monitor.core.share_groups import LAG_METHODS
from monitor.store.base import PARTITION_COLUMN_KEY, Base, one_of
from monitor.store.models import TextArray

_BY_DAY = {"postgresql_partition_by": "RANGE (sampled_at)", "info": {PARTITION_COLUMN_KEY: "sampled_at"}}


class ShareGroupState(Base):
    """One share group at one sample: ShareGroupDescribe's state, members and assignor."""

    __tablename__ = "share_group_states"
    __table_args__ = (Index("ix_share_group_states_cluster_sampled_at", "cluster", "sampled_at"), _BY_DAY)

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    state: Mapped[str]
    members: Mapped[int]
    assignor: Mapped[str | None]
    coordinator: Mapped[int | None]
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class ShareGroupOffset(Base):
    """One share partition at one sample (keyed time first: a cycle's rows share `sampled_at`)."""

    __tablename__ = "share_group_offsets"
    __table_args__ = (CheckConstraint(one_of("lag_method", LAG_METHODS), name="lag_method"), _BY_DAY)

    cluster: Mapped[str] = mapped_column(primary_key=True)
    sampled_at: Mapped[datetime] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    start_offset: Mapped[int | None] = mapped_column(BigInteger)
    end_offset: Mapped[int | None] = mapped_column(BigInteger)
    lag: Mapped[int | None] = mapped_column(BigInteger)
    lag_method: Mapped[str]
    run_id: Mapped[int | None] = mapped_column(BigInteger)


class ShareGroupMember(Base):
    """The current members of each share group and their assignments ("topic:partition")."""

    __tablename__ = "share_group_members"

    cluster: Mapped[str] = mapped_column(primary_key=True)
    group_id: Mapped[str] = mapped_column(primary_key=True)
    member_id: Mapped[str] = mapped_column(primary_key=True)
    client_id: Mapped[str]
    host: Mapped[str]
    rack: Mapped[str | None]
    assignment: Mapped[list[str]] = mapped_column(TextArray)
    updated_at: Mapped[datetime]


class ShareGroupSupport(Base):
    """Whether a cluster has share groups to give, as of its newest share-groups sample."""

    __tablename__ = "share_group_support"

    cluster: Mapped[str] = mapped_column(primary_key=True)
    available: Mapped[bool]
    reason: Mapped[str | None]
    sampled_at: Mapped[datetime]
    listed: Mapped[list[str] | None] = mapped_column(TextArray)
    """The share groups the newest listing named (the group filter applied); a share group's
    alerts resolve as gone when it is not among them. Null when not known."""

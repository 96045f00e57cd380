"""The tables that make the offset lag users read a second old between two offsets cycles: the
end offsets job's listings and the commit stream's marks (`monitor.store.fresh_lag` reads them
with the latest tables of `monitor.store.models`)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, false
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base
from monitor.store.models import LATEST_FILLFACTOR


class RefreshedEndOffset(Base):
    """Each partition's newest end offset from the end offsets job, which lists them every second
    between two offsets cycles; written only when it changes or is missed, so a row not `missed`
    holds as of its cluster's newest listing (`EndOffsetRefresh`), a `missed` one as of
    `answered_at`. Read with `latest_partition_offsets`, the newer of the two
    (`monitor.store.fresh_lag`)."""

    __tablename__ = "refreshed_end_offsets"
    __table_args__ = ({"postgresql_with": {"fillfactor": LATEST_FILLFACTOR}},)

    cluster: Mapped[str] = mapped_column(primary_key=True)
    topic: Mapped[str] = mapped_column(primary_key=True)
    partition: Mapped[int] = mapped_column(primary_key=True)
    end_offset: Mapped[int] = mapped_column(BigInteger)
    answered_at: Mapped[datetime]
    missed: Mapped[bool] = mapped_column(server_default=false())


class EndOffsetRefreshRow(Base):
    """The time of each cluster's newest listing of its end offsets (the end offsets job)."""

    __tablename__ = "end_offset_refreshes"
    __table_args__ = ({"postgresql_with": {"fillfactor": LATEST_FILLFACTOR}},)

    cluster: Mapped[str] = mapped_column(primary_key=True)
    listed_at: Mapped[datetime]
    partitions: Mapped[int]
    missed: Mapped[int]


class CommitStreamMark(Base):
    """How far each cluster's commit stream has read: to the end of `__consumer_offsets` at
    `read_until`, every commit made between `streaming_since` (when it was positioned at the end)
    and then stored; a committed offset sampled since `streaming_since` holds until `read_until`
    unless a newer commit was stored (the commits job writes it, at most twice a second)."""

    __tablename__ = "commit_stream_marks"
    __table_args__ = ({"postgresql_with": {"fillfactor": LATEST_FILLFACTOR}},)

    cluster: Mapped[str] = mapped_column(primary_key=True)
    streaming_since: Mapped[datetime]
    read_until: Mapped[datetime]

"""The facts a consumer group's notification carries besides its rule's summary: the group's worst
partitions, each with its sliding-window status (OK, WARN, ERR, STOP, STALL, REWIND), since when,
its lag and its time until data loss. A share group's notification lists its worst share
partitions the same way, from its newest samples: STALL since when, or OK, and the lag.

A group's own status folds STOP, STALL and REWIND into ERR, so "Group X is in status ERR" cannot
tell a stopped consumer from a stalled or rewinding one; its partitions can. The evaluate stage
keeps them in `derived_group_partition`, one row per partition per evaluation; the alert cycle
reads the newest evaluation of the group when it decides a notification (so the notification says
what was true when it was decided) and looks back at most `SINCE_LOOKBACK` to find when each
listed partition entered its status.

`worst_partitions` (pure) picks and orders them; `PartitionDetails` reads the store (through
`monitor.alert.state`), once per group and cycle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import Connection

from monitor.alert import state
from monitor.alert.model import PartitionDetail
from monitor.core.vocabulary import STATUS_RANK, is_lagging

MAX_PARTITIONS: Final = 5
"""Partitions listed per alert: enough to tell what is wrong, short enough for a pager."""
SINCE_LOOKBACK: Final = timedelta(hours=24)
"""How far back `since` is looked for; a status older than that shows the lookback's start."""
SHARE_LOOKBACK: Final = timedelta(hours=1)
"""How far back a share group's samples are read (every sample, not one row per evaluation): a
share partition stalled for longer shows the lookback's start as its `since`."""
GROUP_ENTITIES: Final = frozenset({"group", "group_topic", "group_partition"})
"""The entities whose alerts are about a consumer group (and carry `group_id`)."""
SHARE_ENTITIES: Final = frozenset({"share_group", "share_group_topic"})
"""The entities whose alerts are about a share group (and carry `group_id`): their share
partitions are listed, STALL (start offset standing still while records wait) or OK with a lag."""


def is_flagged(detail: PartitionDetail) -> bool:
    """A partition worth naming: not OK, behind, or at risk of losing data."""
    return (
        detail.status != "OK"
        or is_lagging(detail.offset_lag)
        or detail.time_until_data_loss_seconds is not None
    )


def _worst_key(detail: PartitionDetail) -> tuple[Any, ...]:
    loss = detail.time_until_data_loss_seconds
    return (
        -STATUS_RANK.get(detail.status, 0),
        math.inf if loss is None else loss,
        -(detail.lag_seconds or 0.0),
        -(detail.offset_lag or 0),
        detail.topic,
        detail.partition,
    )


def worst_partitions(
    details: Iterable[PartitionDetail], limit: int = MAX_PARTITIONS
) -> tuple[tuple[PartitionDetail, ...], int]:
    """The flagged partitions worst first (worst status, then soonest data loss, then oldest and
    largest lag), at most `limit`, and how many were flagged in all."""
    flagged = sorted((d for d in details if is_flagged(d)), key=_worst_key)
    return tuple(flagged[:limit]), len(flagged)


class PartitionDetails:
    """Reads the worst partitions of consumer groups for one alert cycle: each group's newest
    evaluation once, and `since` only for the partitions an alert lists."""

    def __init__(self, conn: Connection, now: datetime, limit: int = MAX_PARTITIONS) -> None:
        self._conn = conn
        self._floor = now - SINCE_LOOKBACK
        self._share_floor = now - SHARE_LOOKBACK
        self._limit = limit
        self._groups: dict[tuple[str, str], list[PartitionDetail]] = {}
        self._shares: dict[tuple[str, str], list[PartitionDetail]] = {}
        self._since: dict[tuple[str, str, str, int], datetime | None] = {}

    def for_alert(
        self, entity: str, cluster: str, labels: Mapping[str, str]
    ) -> tuple[tuple[PartitionDetail, ...], int]:
        """The worst partitions behind an alert on `entity` and how many are flagged; nothing for
        an alert that is not about a consumer or share group."""
        group_id = labels.get("group_id")
        if not group_id or entity not in GROUP_ENTITIES | SHARE_ENTITIES:
            return (), 0
        share = entity in SHARE_ENTITIES
        rows = self._share(cluster, group_id) if share else self._group(cluster, group_id)
        topic, partition = labels.get("topic"), labels.get("partition")
        if entity in ("group_topic", "group_partition", "share_group_topic") and topic:
            rows = [r for r in rows if r.topic == topic]
        if entity == "group_partition" and partition is not None:
            rows = [r for r in rows if str(r.partition) == partition]
        worst, total = worst_partitions(rows, self._limit)
        if share:  # `since` came with the rows
            return worst, total
        return tuple(replace(d, since=self._since_of(cluster, group_id, d)) for d in worst), total

    def _share(self, cluster: str, group_id: str) -> list[PartitionDetail]:
        key = (cluster, group_id)
        if key not in self._shares:
            floor = self._share_floor
            self._shares[key] = state.latest_share_partitions(self._conn, cluster, group_id, floor)
        return self._shares[key]

    def _group(self, cluster: str, group_id: str) -> list[PartitionDetail]:
        key = (cluster, group_id)
        if key not in self._groups:
            self._groups[key] = state.latest_group_partitions(self._conn, cluster, group_id, self._floor)
        return self._groups[key]

    def _since_of(self, cluster: str, group_id: str, detail: PartitionDetail) -> datetime | None:
        key = (cluster, group_id, detail.topic, detail.partition)
        if key not in self._since:
            self._since[key] = state.partition_status_since(
                self._conn, cluster, group_id, detail.topic, detail.partition, detail.status, self._floor
            )
        return self._since[key]

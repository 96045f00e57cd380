"""DescribeLogDirs samples: replica sizes (log_dir_sizes) and log dir volumes (broker_disks)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from monitor.core.records import (
    LogDirReplica,
    LogDirUsage,
)
from monitor.store.samples.staging import (
    append_rows,
)

_LOG_DIR_COLUMNS = (
    "cluster",
    "broker_id",
    "log_dir",
    "topic",
    "partition",
    "sampled_at",
    "size_bytes",
    "offset_lag",
    "is_future",
    "run_id",
)
_DISK_COLUMNS = (
    "cluster",
    "broker_id",
    "log_dir",
    "sampled_at",
    "total_bytes",
    "usable_bytes",
    "error",
    "run_id",
)


def write_log_dirs(
    conn: Connection,
    cluster: str,
    sampled_at: datetime,
    run_id: int | None,
    replicas: Sequence[LogDirReplica],
    usages: Sequence[LogDirUsage],
    *,
    idempotent: bool = False,
) -> dict[str, int]:
    """Append one DescribeLogDirs sample: replica sizes to log_dir_sizes, volumes to broker_disks.

    Returns rows written per table; `idempotent` as for `write_offsets_batch`. Does not commit.
    """
    sizes = [
        (
            cluster,
            r.broker_id,
            r.log_dir,
            r.topic,
            r.partition,
            sampled_at,
            r.size_bytes,
            r.offset_lag,
            r.is_future,
            run_id,
        )
        for r in replicas
    ]
    disks = [
        (cluster, u.broker_id, u.log_dir, sampled_at, u.total_bytes, u.usable_bytes, u.error, run_id)
        for u in usages
    ]
    with conn.begin_nested():
        return {
            "log_dir_sizes": append_rows(
                conn, "log_dir_sizes", _LOG_DIR_COLUMNS, sizes, sampled_at, idempotent
            ),
            "broker_disks": append_rows(conn, "broker_disks", _DISK_COLUMNS, disks, sampled_at, idempotent),
        }

"""End-to-end probe rounds (probe_samples)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from monitor.core.records import (
    ProbeResult,
)
from monitor.store.samples.staging import (
    append_rows,
)

_PROBE_COLUMNS = (
    "cluster",
    "topic",
    "partition",
    "sampled_at",
    "broker_id",
    "leader",
    "ok",
    "produce_seconds",
    "end_to_end_seconds",
    "commit_seconds",
    "error",
    "run_id",
)


def write_probe(
    conn: Connection,
    cluster: str,
    topic: str,
    sampled_at: datetime,
    run_id: int | None,
    results: Sequence[tuple[ProbeResult, int | None]],
    *,
    idempotent: bool = False,
) -> int:
    """Append one probe round: each (result, the partition's leader then) to probe_samples.
    Returns rows written; `idempotent` as for `write_offsets_batch`. Does not commit."""
    rows = [
        (
            cluster,
            topic,
            r.partition,
            sampled_at,
            r.broker_id,
            leader,
            r.ok,
            r.produce_seconds,
            r.end_to_end_seconds,
            r.commit_seconds,
            r.error,
            run_id,
        )
        for r, leader in results
    ]
    with conn.begin_nested():
        return append_rows(conn, "probe_samples", _PROBE_COLUMNS, rows, sampled_at, idempotent)

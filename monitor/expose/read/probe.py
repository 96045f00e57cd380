"""Read layer: the end-to-end probe of a cluster, from `probe_samples` directly (the newest round
shows on the page before the next evaluation): each probe partition's newest round with the
successes and failures over a window, and the latency history per broker for the charts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from monitor.expose.read.fields import Described
from monitor.expose.read.queries import records


@dataclass(frozen=True, slots=True)
class ProbePartitionState(Described):
    """One partition of the probe topic: the broker it probes, its newest probe round, and the
    rounds in the window."""

    __entity__ = "broker"
    __overrides__ = {
        "partition": "partition of the probe topic",
        "leader": "the broker leading the partition at the newest round (null when offline)",
        "sampled_at": "time of the newest probe round",
        "ok": "the newest probe message made the round trip and was committed",
        "error": "why the newest probe round failed, and at which step (null when it did not)",
        "produce_seconds": "newest round: time until acks=all acknowledged",
        "end_to_end_seconds": "newest round: time from producing the message to consuming it back",
        "commit_seconds": "newest round: time the offset commit took",
        "successes": "probe messages through this partition that made the round trip in the window",
        "failures": "probe messages through this partition that failed in the window",
    }

    partition: int
    broker_id: int
    leader: int | None
    sampled_at: datetime
    ok: bool
    error: str | None
    produce_seconds: float | None
    end_to_end_seconds: float | None
    commit_seconds: float | None
    successes: int
    failures: int


@dataclass(frozen=True, slots=True)
class ProbePoint:
    """One probe round on one broker."""

    broker_id: int
    at: datetime
    ok: bool
    end_to_end_seconds: float | None


def partitions(conn: Connection, cluster: str, since: datetime) -> list[ProbePartitionState]:
    """The probe partitions of `cluster` sampled since `since`, by partition; failing ones are
    what the page leads with."""
    return records(
        conn,
        ProbePartitionState,
        """
        SELECT n.partition, n.broker_id, n.leader, n.sampled_at, n.ok, n.error, n.produce_seconds,
               n.end_to_end_seconds, n.commit_seconds, c.successes, c.failures
        FROM (
            SELECT DISTINCT ON (partition) * FROM probe_samples
            WHERE cluster = :c AND sampled_at >= :since ORDER BY partition, sampled_at DESC
        ) n
        JOIN (
            SELECT partition, count(*) FILTER (WHERE ok)::int AS successes,
                   count(*) FILTER (WHERE NOT ok)::int AS failures
            FROM probe_samples WHERE cluster = :c AND sampled_at >= :since GROUP BY partition
        ) c USING (partition)
        ORDER BY n.partition
        """,
        {"c": cluster, "since": since},
    )


def history(conn: Connection, cluster: str, since: datetime) -> list[ProbePoint]:
    """Every probe round of `cluster` since `since`, per broker, oldest first."""
    return records(
        conn,
        ProbePoint,
        """
        SELECT broker_id, sampled_at AS at, ok, end_to_end_seconds FROM probe_samples
        WHERE cluster = :c AND sampled_at >= :since ORDER BY sampled_at, broker_id
        """,
        {"c": cluster, "since": since},
    )

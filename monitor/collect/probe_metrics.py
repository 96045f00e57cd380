"""KMinion's end-to-end metrics, observed by this process's probe rounds.

KMinion (redpanda-data/kminion, `e2e/service.go`) serves its end-to-end measures as histograms
of every probe message and counters of messages and commits. Dashboards and alerts written for it
use `histogram_quantile` over the `_bucket` series and `rate()` over the counters, so the probe
serves the same names and types, with KMinion's `partition_id` label beside our `cluster` and
`broker` (the broker the partition probes). KMinion's commit metrics are labelled by the group
coordinator, which the probe's client does not report: here they are per cluster.

These are process metrics, like the job run counters: the daemon that holds a cluster's lease
runs its probe, so that daemon's /metrics has the cluster's series. The buckets are KMinion's for
its default 5 s SLA: 5 ms doubling up to 5.12 s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from prometheus_client import Counter, Histogram

from monitor.core.records import ProbeResult

BUCKETS: Final = tuple(0.005 * 2**i for i in range(11))
MESSAGE: Final = ["cluster", "partition_id", "broker"]

PRODUCE_LATENCY = Histogram(
    "kminion_end_to_end_produce_latency_seconds",
    "Time until we received an ack (acks=all) for a produced probe message.",
    MESSAGE,
    buckets=BUCKETS,
)
ROUNDTRIP_LATENCY = Histogram(
    "kminion_end_to_end_roundtrip_latency_seconds",
    "Time between producing a probe message and consuming it back.",
    MESSAGE,
    buckets=BUCKETS,
)
COMMIT_LATENCY = Histogram(
    "kminion_end_to_end_offset_commit_latency_seconds",
    "Time the cluster took to answer the probe group's offset commit.",
    ["cluster"],
    buckets=BUCKETS,
)
PRODUCED = Counter(
    "kminion_end_to_end_messages_produced_total",
    "Probe messages produced, counted when the cluster answered (success or failure) or the round's "
    "budget ran out.",
    MESSAGE,
)
PRODUCE_FAILED = Counter(
    "kminion_end_to_end_messages_produced_failed_total",
    "Probe messages that failed to produce (an error or no acknowledgement within the budget).",
    MESSAGE,
)
RECEIVED = Counter(
    "kminion_end_to_end_messages_received_total",
    "Probe messages consumed back within the round's budget.",
    MESSAGE,
)
LOST = Counter(
    "kminion_end_to_end_messages_lost_total",
    "Probe messages produced successfully but not consumed back within the round's budget.",
    MESSAGE,
)
COMMITS = Counter(
    "kminion_end_to_end_offset_commits_total",
    "Offset commits of the probe group.",
    ["cluster"],
)
COMMITS_FAILED = Counter(
    "kminion_end_to_end_offset_commits_failed_total",
    "Offset commits of the probe group that returned an error or timed out.",
    ["cluster"],
)


def observe(cluster: str, attempted: Sequence[ProbeResult]) -> None:
    """Count one round: `attempted` are the results of the partitions a message was sent to (a
    partition its broker does not lead is not produced to, as KMinion produces only to leaders).
    A result's steps are in order, so a consumed message whose result has an error failed at
    the commit."""
    consumed = [r for r in attempted if r.end_to_end_seconds is not None]
    for result in attempted:
        labels = (cluster, str(result.partition), str(result.broker_id))
        PRODUCED.labels(*labels).inc()
        if result.produce_seconds is None:
            PRODUCE_FAILED.labels(*labels).inc()
            continue
        PRODUCE_LATENCY.labels(*labels).observe(result.produce_seconds)
        if result.end_to_end_seconds is None:
            LOST.labels(*labels).inc()
            continue
        RECEIVED.labels(*labels).inc()
        ROUNDTRIP_LATENCY.labels(*labels).observe(result.end_to_end_seconds)
    if not consumed:
        return
    COMMITS.labels(cluster).inc()
    committed = [r.commit_seconds for r in consumed if r.commit_seconds is not None]
    if committed:
        COMMIT_LATENCY.labels(cluster).observe(committed[0])
    if any(r.error is not None or r.commit_seconds is None for r in consumed):
        COMMITS_FAILED.labels(cluster).inc()

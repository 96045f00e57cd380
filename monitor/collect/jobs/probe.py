"""The end-to-end probe job (KMinion's end-to-end monitoring): is the cluster actually usable?

Each run: (1) fit the probe topic to the live brokers (created if missing with a partition
preferred-led by every broker; a new broker takes a spare partition or gets one added; the
replicas on a broker gone longer than `collect.probe.retire_after_seconds`, taken as removed, are
reassigned to live brokers; preferred leaders elected back when their broker returns); (2)
produce one message to each partition its broker leads, with acks=all, consume it back with the
probe's own group and commit it; (3) store one row per partition: produce, end-to-end and commit
latency, or the failure. A partition whose broker does
not lead it (the broker is down, or lost leadership) is a failure of that broker without any
request: the probe measures each broker through the partition it leads.

Partial-failure policy: a cluster that does not answer fails the run (as every job); failing
partitions are rows with their error and problems of the run (it ends `partial`), so they show on
the collection page as well as in the probe's own samples.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import Connection

from monitor.collect import probe_metrics
from monitor.collect.clients import ADMIN, ClientKind
from monitor.collect.context import ClusterContext, CollectorJob, JobRun
from monitor.core.records import ProbePartition, ProbeResult
from monitor.kafka import ProbeClient
from monitor.kafka.protocol import ProbeApi
from monitor.store.runs import Run
from monitor.store.samples import write_probe

PROBE: ClientKind[ProbeApi] = ClientKind(
    "probe", lambda cluster, config: ProbeClient(cluster, config.probe.group_id)
)
"""The probe's producer, consumer (its own group) and topic admin."""


def not_led(partition: ProbePartition) -> ProbeResult:
    """The failure of a broker that does not lead its probe partition."""
    leader = "none" if partition.leader is None else f"broker {partition.leader}"
    return ProbeResult(
        partition.partition,
        partition.broker_id,
        None,
        None,
        None,
        f"broker {partition.broker_id} does not lead its probe partition {partition.partition} "
        f"(leader: {leader}): it is down or lost leadership",
    )


class Absences:
    """Since when each broker the probe topic has replicas on has been missing from the cluster,
    and which of them count as removed (retired). Kept in memory: after a restart the count
    starts again."""

    def __init__(self) -> None:
        self.since: dict[int, datetime] = {}
        self.known: set[int] = set()

    def retired(self, now: datetime, live: Collection[int], after_seconds: float) -> list[int]:
        """The known brokers missing from `live` for at least `after_seconds`, as of `now`."""
        for broker in self.known - set(live):
            self.since.setdefault(broker, now)
        for broker in live:
            self.since.pop(broker, None)
        return sorted(b for b, t in self.since.items() if (now - t).total_seconds() >= after_seconds)

    def saw(self, partitions: Sequence[ProbePartition]) -> None:
        """The topic as it is now: only the brokers it has replicas on are watched."""
        self.known = {b for p in partitions for b in (*p.replicas, p.broker_id)}
        self.since = {b: t for b, t in self.since.items() if b in self.known}


def collect_probe(run: Run, ctx: ClusterContext, absences: Absences) -> None:
    settings = ctx.config.probe
    cluster = ctx.cluster.name
    # 1. The topic, fitted to the live brokers; a broker gone long enough counts as removed.
    brokers = ctx.admin.describe_cluster().broker_ids
    retired = absences.retired(ctx.clock.now(), brokers, settings.retire_after_seconds)
    probe = ctx.client(PROBE)
    partitions = probe.prepare(settings.topic, brokers, settings.replication_factor, retired)
    absences.saw(partitions)
    if retired:
        run.count("brokers_retired", len(retired))
    # 2. One round over the partitions led by their broker; the others fail without a request.
    led = [p for p in partitions if p.led_by_its_broker]
    sampled_at = ctx.clock.now()
    measured = probe.probe(settings.topic, led, settings.budget_seconds) if led else []
    probe_metrics.observe(cluster, measured)
    leaders = {p.partition: p.leader for p in partitions}
    results = [*measured, *(not_led(p) for p in partitions if not p.led_by_its_broker)]
    results.sort(key=lambda r: r.partition)
    # 3. The samples, and the failures as problems of the run.
    rows = [(r, leaders.get(r.partition)) for r in results]
    run_id = run.run_id

    def write(conn: Connection, replay: bool) -> object:
        return write_probe(conn, cluster, settings.topic, sampled_at, run_id, rows, idempotent=replay)

    ctx.writer.submit(f"{cluster}:probe", len(rows), write)
    failed = [r for r in results if not r.ok]
    for result in failed:
        run.problem(f"probe of broker {result.broker_id} (partition {result.partition}): {result.error}")
    run.count("partitions", len(results))
    run.count("succeeded", len(results) - len(failed))
    run.count("failed", len(failed))


def build(ctx: ClusterContext) -> JobRun:
    absences = Absences()
    return lambda run: collect_probe(run, ctx, absences)


JOB = CollectorJob(
    name="probe",
    build=build,
    interval=lambda intervals: intervals.probe_seconds,
    tables=("probe_samples",),
    first_run_in=3.0,
    enabled=lambda config: config.probe.enabled,
    clients=(ADMIN, PROBE),
)

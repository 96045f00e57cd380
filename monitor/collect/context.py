"""What the jobs of one cluster share, and what a collector job is.

A job (`CollectorJob`) is a name, the setting that says how often it runs, the tables it writes,
the Kafka clients it uses (`monitor.collect.clients`) and a `build` function that makes, once per
cluster, the callable that runs one collection of it inside a recorded run. The jobs are
registered in `monitor.collect.jobs`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from monitor.collect.clients import ADMIN, C, ClientKind, Clients
from monitor.collect.commit_state import CommitState
from monitor.core.clock import Clock
from monitor.core.records import TopicInfo, TopicPartition
from monitor.core.settings import ClusterConfig, CollectConfig, Intervals
from monitor.kafka.protocol import AdminApi
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import Run

log = logging.getLogger(__name__)

EVALUATION_REQUESTED = "evaluation_requested"
"""The count a run that asked for an evaluation (`ClusterContext.critical`) carries."""

JobRun = Callable[[Run], None]
"""One collection of one job of one cluster, inside its recorded run."""

NAMES_REMEMBERED = 100_000
"""The most topic and group names whose verdict a cluster's filters remember (`Verdicts`)."""


class Verdicts:
    """A name filter's verdicts, remembered: the commit stream asks for every commit it reads,
    and a fleet has a few thousand names where it reads tens of thousands of commits a minute.
    Bounded (forgets all at NAMES_REMEMBERED); a filter's verdict on a name never changes (the
    settings are frozen), so forgetting costs only the asking again."""

    def __init__(self, accepts: Callable[[str], bool]) -> None:
        self._accepts = accepts
        self._known: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        known = self._known.get(name)
        if known is None:
            known = self._accepts(name)
            if len(self._known) >= NAMES_REMEMBERED:
                self._known.clear()
            self._known[name] = known
        return known


@dataclass
class Topology:
    """The allowed partitions of a cluster, as of the last metadata sample."""

    partitions: list[TopicPartition]
    observed_at: datetime
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    """Leader broker of each partition then: ListOffsets goes in chunks per leader."""

    @classmethod
    def of(cls, topics: Iterable[TopicInfo], observed_at: datetime) -> Topology:
        topics = list(topics)
        return cls(
            [(t.name, p.partition) for t in topics for p in t.partitions],
            observed_at,
            {(t.name, p.partition): p.leader for t in topics for p in t.partitions if p.leader is not None},
        )


@dataclass
class ClusterContext:
    """The clients, store access and settings of one cluster's jobs, and what one job learns
    for another (the metadata job's `topology`, read by the offsets job)."""

    cluster: ClusterConfig
    clients: Clients
    """The Kafka clients the cluster's jobs declared (`CollectorJob.clients`)."""
    engine: Engine
    writer: BufferedWriter
    clock: Clock
    config: CollectConfig
    on_critical: Callable[[str], object] | None = None
    topology: Topology | None = None
    consumed: frozenset[TopicPartition] | None = None
    """The partitions the watched groups have committed offsets on, as of the offsets job's last
    cycle that answered them (None before): the end offsets job lists these only."""
    intervals: Intervals = field(default_factory=Intervals)
    """The schedule the jobs run on (a job that works between runs paces itself by it)."""
    commits: CommitState = field(default_factory=CommitState)
    """The committed offsets the commits job streams, read by the offsets job."""
    on_sample: Callable[[str, str, datetime], object] | None = None
    """Told (the cluster's name, the job's, when the run ended) after each run that reached the
    cluster and was recorded, its samples written: an evaluation waiting for a sample
    (core.scheduler.DueRun) starts then."""
    run_soon: Callable[[str], object] | None = None
    """Ask for the next run of one of the cluster's jobs (by name) now rather than an interval
    later (None: runs come at their interval only)."""
    run_later: Callable[[str, float], object] | None = None
    """Ask for one run of one of the cluster's jobs (by name) some seconds from now, beside its
    interval; a second request before then replaces the first (None: none)."""
    closers: list[Callable[[], None]] = field(default_factory=list)
    """What the jobs started beside their runs (threads), stopped before the clients close."""
    watches_topic: Callable[[str], bool] = field(init=False, repr=False, compare=False)
    """Whether the cluster's topic filter accepts a topic (remembered: `Verdicts`)."""
    _group_filter: Callable[[str], bool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.watches_topic = Verdicts(self.cluster.topics.accepts)
        self._group_filter = Verdicts(self.cluster.groups.accepts)

    def client(self, kind: ClientKind[C]) -> C:
        """The client of `kind` (one the job declared); LookupError when the cluster has none."""
        client = self.clients.get(kind)
        if client is None:
            raise LookupError(f"cluster {self.cluster.name} has no {kind.name!r} client")
        return client

    def optional_client(self, kind: ClientKind[C]) -> C | None:
        """The client of `kind`, None when the cluster has none (a job that works without it)."""
        return self.clients.get(kind)

    @property
    def admin(self) -> AdminApi:
        return self.client(ADMIN)

    def allowed_topics(self) -> list[str]:
        """The cluster's topics its topic filter accepts (internal ones only when configured)."""
        return [
            name
            for name in self.admin.list_topic_names(include_internal=self.cluster.include_internal_topics)
            if self.watches_topic(name)
        ]

    def watches_group(self, group_id: str) -> bool:
        """Whether the cluster's groups are sampled with `group_id`: its group filter accepts it
        and it is not the end-to-end probe's own group, which the probe measures itself (as a
        group it would only be an empty phantom beside the users' groups, in every list)."""
        return group_id != self.config.probe.group_id and self._group_filter(group_id)

    def critical(self, run: Run, job: str, changed: bool) -> None:
        """Ask for an evaluation as soon as `run` is recorded when `changed` (an input of a
        critical rule changed): `recorded` asks then."""
        if changed and self.on_critical is not None:
            run.count(EVALUATION_REQUESTED, 1)
            log.info("%s/%s: a change critical rules depend on; evaluating now", self.cluster.name, job)

    def recorded(self, run: Run) -> None:
        """`run` and its samples are in the store: ask for the evaluation it asked for (`critical`),
        and tell `on_sample` when it reached the cluster. Not before: a `for:` counts to the end
        of the newest run that reached the cluster (monitor.evaluate.observed.observed_at), and
        asked while the run was under way the evaluation would see its samples without counting
        them, and a page would wait for the next evaluation."""
        if run.counts.get(EVALUATION_REQUESTED) and self.on_critical is not None:
            self.on_critical(self.cluster.name)
        reached = run.reached
        if reached is not None and self.on_sample is not None:
            self.on_sample(self.cluster.name, run.job, reached)


@dataclass(frozen=True)
class CollectorJob:
    """One kind of collection, run for every cluster at its interval."""

    name: str
    """The job's name in `collection_runs.job`, the scheduler and the collection page."""
    build: Callable[[ClusterContext], JobRun]
    """Makes a cluster's runner once (it may keep state across runs)."""
    interval: Callable[[Intervals], float]
    """Seconds between runs, from the settings."""
    tables: tuple[str, ...]
    """The tables it writes (each table has one writing job)."""
    first_run_in: float = 0.0
    """Seconds after start of the first run (spreads the first runs out)."""
    enabled: Callable[[CollectConfig], bool] = lambda config: True
    """Whether it runs at all under the settings (a job that writes to the cluster is opt-in)."""
    clients: tuple[ClientKind[Any], ...] = (ADMIN,)
    """The Kafka clients it uses (made and started by the collector before its first run)."""

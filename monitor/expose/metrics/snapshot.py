"""The `/metrics` snapshot: the state metrics read once per evaluation and kept as encoded bytes,
so a scrape costs the same at 10 topics and at 10,000 and never queries PostgreSQL per series.

How it stays current: `check()` runs a cheap query, the newest evaluation of each cluster
(`monitor.store.versions.newest_evaluations`) and the newest offsets run of each cluster without
one yet (`unevaluated_collections`: until its first evaluation, a cluster's offset lag series come
from the offsets stored, `state_queries`); when that changed since the snapshot was built
(or the last build failed), it reads the state once (`prometheus.StateCollector`), encodes the
text format and its gzip form, and swaps the new snapshot in. The daemon runs `check()` every
`metrics.snapshot_check_seconds` (`monitor/app.py`); a scrape that finds no check within that
time starts one in the background and is served what is there (only a scrape before the first
snapshot waits for its build, up to `metrics.scrape_timeout_seconds`; a build may take up to
`metrics.build_timeout_seconds`, which a large fleet on a busy machine needs). The push component
reads the same snapshot's families.

The offset lag series follow the commits between evaluations (the other series the evaluation):
a scrape or a push first puts the fresh offset lag of the groups with commits since the last
fresh read in the snapshot (`fresh.py`), unless one ran within `FRESH_FOR_SECONDS`. Nothing reads
it while nothing scrapes. A scrape waits for that read up to `FRESH_WAIT_SECONDS` and is then
served what is there (a fleet whose commits take longer to read, about 100,000 group-partitions
committing every few seconds, gets them at the next scrape), and never waits for a build (the
fresh read swaps its lines into whichever snapshot is current when it ends).

A scrape serves the snapshot's bytes followed by a few gauges about the snapshot and this
process's own metrics (the default registry: notifications, runs, pushes, process and gc), which
are cheap. Each build is complete, so a group, topic or broker that is gone from the latest
evaluation is gone from the next snapshot.

Failure policy (every answer is 200):
- PostgreSQL away or too slow for the check or the build: the last good snapshot is still served,
  marked stale: `kafka_health_up` 0, `kafka_health_snapshot_failed` 1 and
  `kafka_health_snapshot_age_seconds` growing; with no snapshot yet, only the process metrics;
- a build where some state query failed never replaces a complete snapshot: the complete one
  stays, marked stale, and the failed queries show in `kafka_health_scrape_error{query}`; with no
  complete snapshot to keep, the partial one is served (missing the failed queries' families).
"""

from __future__ import annotations

import gzip as gzip_format
import logging
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from monitor.core.errors import MonitorError
from monitor.core.scheduler import Pacing
from monitor.core.settings import MetricsConfig
from monitor.expose.metrics import fresh
from monitor.expose.metrics.catalogue import BY_NAME
from monitor.expose.metrics.prometheus import StateCollector, StateRead
from monitor.expose.metrics.state_queries import queries
from monitor.expose.metrics.text_format import Families, encode
from monitor.store.fresh_lag import changed_since, groups_lags
from monitor.store.versions import Collections, Evaluations, newest_evaluations, unevaluated_collections

log = logging.getLogger(__name__)

Marker = tuple[Evaluations, Collections]
"""The newest evaluation of each evaluated cluster and the newest offsets run of each other one
(`monitor.store.versions`): a new one means a new snapshot."""

_GZIP_LEVEL = 6
FRESH_FOR_SECONDS = 1.0
"""A fresh read of the offset lag serves the scrapes and pushes of this many seconds after it."""
FRESH_WAIT_SECONDS = 1.0
"""The longest a scrape waits for a fresh read before it is served what is there."""
BUILD_REST = 2.0
"""After a build, the next waits this many times as long as it took (`core.scheduler.Pacing`):
builds take at most a third of a core. A build at 100,000 group-partitions takes 8-10 s on a quiet
machine; before a cluster's first evaluation each offsets run (every 15 s) is a new snapshot."""
PACED_FROM_SECONDS = 1.0
"""Builds that take less are never followed by a rest (a new evaluation shows at the next check)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One build: the state in the text format, plain and gzip-encoded."""

    state: StateRead
    """The build's read (its offset lag families are the evaluation's; `lag` holds the fresh ones)."""
    marker: Marker
    text: bytes
    gzip_head: bytes
    """The gzip header and the compressed `text`, flushed to a byte boundary; `_gzip` continues it."""
    _gzip: zlib._Compress
    families: tuple[Metric, ...]
    """The families the push targets read (`keep`); the others live only as bytes."""
    lag: fresh.LagSection
    """The offset lag families, at the end of `text`, by group (`fresh.py`)."""
    rest_length: int
    """The length of the text before the offset lag families."""
    rest_head: bytes
    """`gzip_head` of the text before the offset lag families; `_rest_gzip` continues it."""
    _rest_gzip: zlib._Compress

    def body(self, tail: bytes, gzip: bool) -> bytes:
        """`text` followed by `tail`, gzip-encoded when `gzip` (one gzip member: only `tail` is
        compressed now)."""
        if not gzip:
            return self.text + tail
        rest = self._gzip.copy()
        return self.gzip_head + rest.compress(tail) + rest.flush()


def build(state: StateRead, marker: Marker, keep: Collection[str] = ()) -> Snapshot:
    """Encode `state`; keep the families named in `keep` for the push targets."""
    rest = [family for family in state.families if family.name not in fresh.OFFSET_LAG_FAMILIES]
    lag = fresh.LagSection([family for family in state.families if family.name in fresh.OFFSET_LAG_FAMILIES])
    encoded = encode(rest)
    compressor = zlib.compressobj(_GZIP_LEVEL, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    head = compressor.compress(encoded) + compressor.flush(zlib.Z_SYNC_FLUSH)
    kept = tuple(family for family in rest if family.name in keep)
    return _with_lag(state, marker, kept, lag, encoded, head, compressor, keep)


def freshened(snapshot: Snapshot, lags: fresh.Fresh, keep: Collection[str]) -> Snapshot:
    """`snapshot` with the offset lag of the groups in `lags`: only their lines are encoded again,
    and only the offset lag families compressed again."""
    lag = snapshot.lag.overlaid(lags)
    kept = tuple(f for f in snapshot.families if f.name not in fresh.OFFSET_LAG_FAMILIES)
    rest = snapshot.text[: snapshot.rest_length]
    return _with_lag(
        snapshot.state, snapshot.marker, kept, lag, rest, snapshot.rest_head, snapshot._rest_gzip, keep
    )


def _with_lag(
    state: StateRead,
    marker: Marker,
    kept: tuple[Metric, ...],
    lag: fresh.LagSection,
    rest: bytes,
    rest_head: bytes,
    rest_gzip: zlib._Compress,
    keep: Collection[str] = (),
) -> Snapshot:
    lag_text = lag.text()
    compressor = rest_gzip.copy()
    head = rest_head + compressor.compress(lag_text) + compressor.flush(zlib.Z_SYNC_FLUSH)
    families = kept + lag.families(keep)
    return Snapshot(
        state, marker, rest + lag_text, head, compressor, families, lag, len(rest), rest_head, rest_gzip
    )


class MetricsSnapshot:
    """What `/metrics` serves and the push targets read, rebuilt when a new evaluation lands.
    Thread-safe: scrapes read the current snapshot while one refresh at a time rebuilds it."""

    def __init__(
        self,
        engine: Callable[[], Engine],
        settings: MetricsConfig,
        *,
        partition_series_off: Collection[str] = (),
        keep: Collection[str] = (),
        process: CollectorRegistry = REGISTRY,
    ) -> None:
        """`engine` is called at the first refresh (the store may not have started yet);
        `partition_series_off`: the clusters without partition-level series; `keep`: the metric
        names whose families `families()` returns."""
        self._engine = engine
        self._settings = settings
        self._off = frozenset(partition_series_off)
        self._keep = frozenset(keep)
        self._process = process
        self._queries = tuple(query.name for query in queries(settings.partition_series))
        self._pacing = Pacing(BUILD_REST)
        self._collector: StateCollector | None = None
        self._refreshing = threading.Lock()
        """One check (and build) at a time."""
        self._freshening = threading.Lock()
        """One fresh read at a time."""
        self._fresh_reader: threading.Thread | None = None
        """The thread of the last fresh read a scrape started (`_freshen_for_scrape`)."""
        self._starting_reader = threading.Lock()
        self._swap = threading.Lock()
        """Held to replace the current snapshot (a build's, a fresh read's)."""
        self._background = threading.Lock()
        self._checker: threading.Thread | None = None
        """The thread of the last check a scrape started (`_check_in_background`)."""
        self._current: Snapshot | None = None
        self._checked_at: float | None = None
        """monotonic time of the last check that ran (successful or not)."""
        self._confirmed_at = 0.0
        """monotonic time at which the current snapshot was last known to be current."""
        self._failed = False
        self._errors: frozenset[str] = frozenset()
        """The state queries that failed in the last check or build (all when PostgreSQL was away)."""
        self._fresh_since: datetime | None = None
        """The time from which the next check looks for commits (`fresh`); None: from the build."""
        self._freshened_at: float | None = None
        """monotonic time of the last fresh read of the offset lag (`fresh`)."""

    @property
    def current(self) -> Snapshot | None:
        return self._current

    def refresh(self, *, unless_checked_within: float | None = None) -> Snapshot | None:
        """`check`, then make the offset lag of the groups with new commits fresh (`fresh.py`);
        the snapshot now served. Raises nothing (see `check`)."""
        self.check(unless_checked_within=unless_checked_within)
        self._freshen()
        return self._current

    def check(self, *, unless_checked_within: float | None = None) -> Snapshot | None:
        """Check for a new evaluation and rebuild when there is one, when the last build failed
        or when there is no snapshot yet; the snapshot now served. With `unless_checked_within`,
        nothing is done when a check ran within that many seconds (or runs now: this waits for
        it). After a build of `PACED_FROM_SECONDS` or more, a new snapshot waits until the rest
        after it is over (`BUILD_REST`).
        Blocks for the check query (bounded by `metrics.scrape_timeout_seconds`) and a build
        (`metrics.build_timeout_seconds`); raises nothing (failures are logged and served as the
        snapshot gauges)."""
        with self._refreshing:
            now = time.monotonic()
            within = unless_checked_within
            if within is not None and self._checked_at is not None and now - self._checked_at < within:
                return self._current
            self._checked_at = now
            try:
                marker = self._marker()
            except (SQLAlchemyError, MonitorError) as exc:
                self._failure(frozenset(self._queries), f"PostgreSQL did not answer the check: {exc}")
                return self._current
            except Exception:  # a scrape must still be answered; the bug is logged
                log.exception("metrics: checking for a new evaluation failed")
                self._failure(frozenset(self._queries), "the check failed")
                return self._current
            current = self._current
            if current is not None and current.marker == marker and not self._failed:
                self._confirmed_at = now
            elif current is None or self._pacing.rested(now):
                self._build(marker)
                built = time.monotonic()
                if built - now >= PACED_FROM_SECONDS:
                    self._pacing.ran(now, built, marker)
            else:
                log.debug("metrics: a new snapshot waits for the rest after the last build")
            return self._current

    def families(self) -> Sequence[Metric]:
        """The kept state families of a snapshot checked within `metrics.snapshot_check_seconds`
        (checked now when not), its offset lag fresh."""
        snapshot = self.refresh(unless_checked_within=self._settings.snapshot_check_seconds)
        return snapshot.families if snapshot is not None else ()

    def body(self, *, gzip: bool) -> bytes:
        """A scrape's answer in the text format (gzip-encoded when `gzip`): the snapshot, its
        offset lag fresh, the snapshot gauges and this process's metrics. Starts a check in the
        background when none ran recently; waits for it (up to `metrics.scrape_timeout_seconds`)
        only while there never was a snapshot."""
        if self._current is None or self._due():
            checker = self._check_in_background()
            if self._current is None and checker is not None:
                checker.join(self._settings.scrape_timeout_seconds)
        self._freshen_for_scrape()
        snapshot = self._current
        tail = generate_latest(Families(self._gauges(snapshot))) + generate_latest(self._process)
        if snapshot is not None:
            return snapshot.body(tail, gzip)
        return gzip_format.compress(tail, _GZIP_LEVEL) if gzip else tail

    @contextmanager
    def _bounded(self) -> Iterator[Connection]:
        """A transaction whose statements each end within `metrics.scrape_timeout_seconds`."""
        with self._engine().begin() as conn:
            timeout_ms = int(self._settings.scrape_timeout_seconds * 1000)
            conn.execute(text(f"SET LOCAL statement_timeout = {timeout_ms}"))
            yield conn

    def _marker(self) -> Marker:
        with self._bounded() as conn:
            return newest_evaluations(conn), unevaluated_collections(conn)

    def _freshen_for_scrape(self) -> None:
        """`_freshen` on a thread of its own (one at a time), waited for up to `FRESH_WAIT_SECONDS`:
        a fresh read that takes longer ends for the next scrape."""
        if not self._fresh_due():
            return
        with self._starting_reader:
            reader = self._fresh_reader
            if reader is None or not reader.is_alive():
                reader = threading.Thread(target=self._freshen, name="metrics-fresh", daemon=True)
                self._fresh_reader = reader
                reader.start()
        reader.join(FRESH_WAIT_SECONDS)

    def _fresh_due(self) -> bool:
        """Whether a fresh read is due: there is a snapshot, and no read ended within
        `FRESH_FOR_SECONDS` since its build (a build since one: read again)."""
        done = self._freshened_at
        recent = done is not None and time.monotonic() - done < FRESH_FOR_SECONDS
        return self._current is not None and not (recent and self._fresh_since is not None)

    def _freshen(self) -> None:
        """Put the fresh offset lag of the groups with commits or moved end offsets since the last
        fresh read in the served snapshot (`fresh`), unless one ended within `FRESH_FOR_SECONDS`
        (or runs now: this waits for it); on failure, log it and leave the snapshot as it is (the
        offset lag age gauge grows)."""
        with self._freshening:
            if not self._fresh_due():
                return
            with self._swap:
                current, since = self._current, self._fresh_since
            assert current is not None  # (`_fresh_due`)
            after_build = since is None
            if since is None:
                evaluated = [at for _, at in current.marker[0]]
                since = min(evaluated, default=datetime.now(UTC)) - fresh.LOOK_BACK_AFTER_BUILD
            try:
                with self._bounded() as conn:
                    checked_at = conn.execute(text("SELECT now()")).scalar_one()
                    lags = {
                        (cluster, group): partitions
                        for cluster, groups in changed_since(conn, since, long_look_back=after_build).items()
                        for group, partitions in groups_lags(conn, cluster, groups).items()
                    }
            except (SQLAlchemyError, MonitorError) as exc:
                log.warning(
                    "metrics: reading the fresh offset lag failed; the last one read is served: %s", exc
                )
                return
            except Exception:  # a scrape must still be answered; the bug is logged
                log.exception("metrics: reading the fresh offset lag failed")
                return
            with self._swap:
                served = self._current or current
                rebuilt = served is not current
                if lags:
                    self._current = freshened(served, lags, self._keep)
                if not rebuilt:  # a build in between reads again from its evaluation (`_fresh_since` None)
                    self._fresh_since = checked_at - fresh.LOOK_BACK
                self._freshened_at = time.monotonic()

    def _build(self, marker: Marker) -> None:
        if self._collector is None:
            self._collector = StateCollector(self._engine(), self._settings, self._off)
        state = self._collector.read()
        errors = frozenset(self._queries) - state.answered
        current = self._current
        if state.complete or current is None or not current.state.complete:
            built = build(state, marker, self._keep)
            with self._swap:
                self._current, self._fresh_since = built, None
            self._confirmed_at = time.monotonic()
        if state.complete:
            if self._failed:
                log.info("metrics: the snapshot is current again")
            self._failed, self._errors = False, frozenset()
        else:
            self._failure(errors, f"the state queries {', '.join(sorted(errors))} did not answer")

    def _failure(self, errors: frozenset[str], reason: str) -> None:
        if not self._failed:
            kept = "the last good snapshot is served, marked stale" if self._current else "no snapshot yet"
            log.warning("metrics: refreshing the snapshot failed (%s); %s", reason, kept)
        self._failed, self._errors = True, errors

    def _due(self) -> bool:
        checked = self._checked_at
        return checked is None or time.monotonic() - checked >= self._settings.snapshot_check_seconds

    def _check_in_background(self) -> threading.Thread | None:
        """The thread of the check running in the background, started now unless one is on its
        way (None when it is not known yet)."""
        if not self._background.acquire(blocking=False):
            return self._checker  # one is on its way

        def run() -> None:
            try:
                self.check(unless_checked_within=self._settings.snapshot_check_seconds)
            finally:
                self._background.release()

        checker = threading.Thread(target=run, name="metrics-snapshot", daemon=True)
        self._checker = checker
        checker.start()
        return checker

    def _gauges(self, snapshot: Snapshot | None) -> list[Metric]:
        """The families about the snapshot (catalogue: "The snapshot")."""

        def gauge(name: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, BY_NAME[name].meaning, value=value)

        complete = snapshot is not None and snapshot.state.complete
        gauges: list[Metric] = [gauge("kafka_health_up", 1.0 if complete and not self._failed else 0.0)]
        errors = GaugeMetricFamily(
            "kafka_health_scrape_error", BY_NAME["kafka_health_scrape_error"].meaning, labels=["query"]
        )
        failed = self._errors if snapshot is not None else frozenset(self._queries)  # none served yet
        for name in self._queries:
            errors.add_metric([name], 1.0 if name in failed else 0.0)
        gauges += [errors, gauge("kafka_health_snapshot_failed", 1.0 if self._failed else 0.0)]
        if snapshot is None:
            return gauges
        gauges += [
            gauge("kafka_health_snapshot_age_seconds", time.monotonic() - self._confirmed_at),
            gauge("kafka_health_scrape_duration_seconds", snapshot.state.seconds),
        ]
        if self._freshened_at is not None:
            gauges.append(gauge("kafka_health_offset_lag_age_seconds", time.monotonic() - self._freshened_at))
        if self._settings.partition_series:
            gauges += [
                gauge("kafka_health_partition_series", snapshot.state.partition_series),
                gauge("kafka_health_partition_series_dropped", snapshot.state.dropped),
            ]
        return gauges

"""The store as a runtime component: the engine, a schema check, the day partitions the writes
need, and the maintenance (rollups, retention) the daemon schedules once it is up."""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy import Engine, select

from monitor.core.clock import Clock
from monitor.core.errors import StoreUnavailableError
from monitor.core.settings import DatabaseConfig
from monitor.store import migrate
from monitor.store.engine import make_engine, mask_url
from monitor.store.expiry import prune_history
from monitor.store.metadata import prune_runs
from monitor.store.models import Cluster
from monitor.store.objectives import prune_minutes
from monitor.store.partitions import LOCK_WAIT, PARTITIONED_TABLES, day_of, ensure_days, maintain_partitions
from monitor.store.rollups import COARSE, FINE, SOURCES, prune_marks, rollup_table_name
from monitor.store.samples import prune_record_timestamps

log = logging.getLogger(__name__)


def rollup_retention(config: DatabaseConfig) -> dict[str, int]:
    """Rollup table -> the days it keeps (every other partitioned table keeps the samples')."""
    days = {FINE: config.rollup_15m_retention_days, COARSE: config.rollup_1h_retention_days}
    return {rollup_table_name(s, r): n for s in SOURCES for r, n in days.items()}


class StoreService:
    name = "store"

    def __init__(self, url: str, config: DatabaseConfig, clock: Clock) -> None:
        self._url = url
        self._config = config
        self._clock = clock
        self._engine: Engine | None = None

    @property
    def engine(self) -> Engine:
        if self._engine is None:
            raise RuntimeError("the store is not started")
        return self._engine

    def start(self) -> None:
        """Connect, refuse a schema that is not at the migrations' head, create today's partition
        of every table partitioned by day (one catalog lookup when they exist). The rest of the
        maintenance (`maintain`: yesterday's and the coming days' partitions, 100-odd tables a
        new database creates in about half a second, the rollups, which can take minutes after a
        daemon was down, and retention) is not waited for: the daemon runs it in the background
        once the collectors have answered. A write for a day without its partition creates it
        (`partitions.ensure_days`, `ingest.copy_rows`)."""
        self._engine = make_engine(self._url)
        current, heads = migrate.at_head(self._url)
        if current not in heads:
            raise StoreUnavailableError(
                f"the schema of {mask_url(self._url)} is at revision {current or 'none'}, "
                f"the code expects {', '.join(heads)}; run `kafka-health db migrate`"
            )
        with self._engine.begin() as conn:
            today = {day_of(self._clock.now())}
            # One transaction, the quickest on a new database; on a database that another
            # instance uses, today's partitions are there already.
            ensure_days(conn, dict.fromkeys(PARTITIONED_TABLES, today), apart=False)

    def maintain(self) -> list[str]:
        """Create the coming days' sample partitions, roll up the lag history of complete hours
        (`monitor.store.rollups`), drop what is past its retention, and prune the
        record-timestamp cache of entries older than the retention (their records are deleted
        by Kafka's own retention long before, or re-read when still needed), and the
        collection runs older than the retention, and the lag objectives' minutes past the
        longest window (store.objectives), and what is over (resolved findings and alerts,
        closed incidents, sent notifications, ended silences: store.expiry) past
        `history_retention_days`. Returns the tables whose partitions wait for another pass
        (`MaintenanceResult.postponed`)."""
        now = self._clock.now()
        result = maintain_partitions(
            self.engine,
            now,
            ahead_days=self._config.partitions_ahead_days,
            retention_days=self._config.sample_retention_days,
            longer=rollup_retention(self._config),
        )
        with self.engine.begin() as conn:
            clusters = conn.execute(select(Cluster.name)).scalars().all()
            cutoff = now - timedelta(days=self._config.sample_retention_days)
            pruned = sum(prune_record_timestamps(conn, cluster, cutoff) for cluster in clusters)
            runs = prune_runs(conn, cutoff)
            prune_marks(conn, (now - timedelta(days=self._config.rollup_1h_retention_days)).date())
            prune_minutes(conn, now)
        over = prune_history(self.engine, now - timedelta(days=self._config.history_retention_days))
        if result.postponed:
            log.warning(
                "the partitions of %s wait for another maintenance pass: other transactions held "
                "these tables longer than %s s",
                ", ".join(result.postponed),
                int(LOCK_WAIT.total_seconds()),
            )
        if result.rolled_up:
            log.info("rolled up the lag history of %s", ", ".join(result.rolled_up))
        if result.dropped:
            log.info("dropped expired sample partitions: %s", ", ".join(result.dropped))
        if pruned:
            log.info("pruned %d cached record timestamps older than %s", pruned, cutoff.date())
        if runs:
            log.info("pruned %d collection runs older than %s", runs, cutoff.date())
        if over:
            log.info(
                "deleted history older than %d days: %s",
                self._config.history_retention_days,
                ", ".join(f"{count} {table}" for table, count in over.items()),
            )
        return result.postponed

    def stop(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

"""The embedded stack as a whole: what `kafka-health setup`, `run` and `demo` need locally."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from monitor.devtools.paths import cache_dir, var_dir

if TYPE_CHECKING:  # imported where used: `run` on a configured database needs neither server
    from monitor.core.settings import Settings
    from monitor.devtools.kafka_cluster import DevKafkaCluster
    from monitor.devtools.postgres import LocalPostgres

log = logging.getLogger(__name__)
Report = Callable[[str], None]


def dev_kafka(settings: Settings) -> DevKafkaCluster:
    from monitor.devtools.kafka_cluster import DevKafkaCluster

    return DevKafkaCluster(settings.dev_kafka, var_dir() / "kafka", cache_dir())


def local_postgres(settings: Settings, report: Report) -> LocalPostgres:
    from monitor.devtools.postgres import LocalPostgres

    return LocalPostgres(var_dir() / "postgres", settings.database.local_port, log=report)


def setup(settings: Settings, report: Report, *, kafka: bool = True, postgres: bool = True) -> None:
    """Fetch or check everything the embedded stack runs on. Idempotent; fast when done."""
    from monitor.devtools.jdbc import ensure_jdbc_driver

    if kafka:
        report(f"Kafka {settings.dev_kafka.version} broker jars: {dev_kafka(settings).ensure_jars(report)}")
    report(f"PostgreSQL JDBC driver: {ensure_jdbc_driver(report=report)}")
    if postgres and settings.database.url is None:
        report(f"PostgreSQL server binaries: {local_postgres(settings, report).find_binaries()}")


@dataclass
class LocalServices:
    """What `local_services` started, to stop exactly that on exit."""

    database_url: str
    started: list[Callable[[], object]] = field(default_factory=list)


@contextmanager
def local_services(settings: Settings, report: Report, *, with_kafka: bool) -> Iterator[LocalServices]:
    """Start the local PostgreSQL when `database.url` is unset (and the local Kafka cluster when
    `with_kafka`), migrate the schema, and stop on exit whatever this call started."""
    from monitor.store import migrate

    services = LocalServices(database_url="")
    try:
        if with_kafka:
            cluster = dev_kafka(settings)
            was_running = any(node.running for node in cluster.status())
            report(f"starting the local Kafka cluster ({settings.dev_kafka.nodes} nodes) ...")
            cluster.up(report=report)
            if not was_running:
                services.started.append(cluster.down)
            report(f"Kafka is up: {cluster.bootstrap_servers}")
        if settings.database.url is not None:
            services.database_url = settings.database.url.get_secret_value()
        else:
            pg = local_postgres(settings, report)
            was_running = pg.status()
            pg.up()
            if not was_running:
                services.started.append(pg.down)
            services.database_url = pg.url()
            report(f"PostgreSQL is up on 127.0.0.1:{settings.database.local_port} (data in {pg.home})")
        migrate.upgrade(services.database_url)
        yield services
    finally:
        for stop in reversed(services.started):
            try:
                stop()
            except Exception:
                log.exception("could not stop a local service")

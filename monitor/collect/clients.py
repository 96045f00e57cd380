"""The Kafka clients of one cluster's jobs: each job names the kinds it needs (`CollectorJob.clients`),
the collector makes each kind once, starts them before the first run and closes them, last made
first, when it stops.

A kind (`ClientKind`) is a name and how to make the real client from the settings. It lives with
what uses it: the kinds several jobs share below, a job's own kind in the job's module. Tests and
benchmarks hand the collector other clients by kind name (a fake cluster's).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from monitor.core.errors import ConfigError
from monitor.core.settings import ClusterConfig, CollectConfig
from monitor.kafka import KafkaAdmin, RecordTimestampReader
from monitor.kafka.protocol import AdminApi, Client, TimestampReader

log = logging.getLogger(__name__)

C = TypeVar("C", bound=Client)


@dataclass(frozen=True)
class ClientKind(Generic[C]):
    """One kind of client a job asks for by this object (`ClusterContext.client`)."""

    name: str
    """Unique among the kinds; the key a fake cluster's clients are handed in by."""
    real: Callable[[ClusterConfig, CollectConfig], C | None]
    """Makes the real client (no connection yet); None: the cluster has none of this kind (the
    job is told so and works without it)."""


ADMIN: ClientKind[AdminApi] = ClientKind("admin", lambda cluster, config: KafkaAdmin(cluster))
"""Metadata, configs, group offsets: every job's first client."""
READER: ClientKind[TimestampReader] = ClientKind(
    "reader", lambda cluster, config: RecordTimestampReader(cluster)
)
"""The consumer that reads record timestamps (lag in seconds)."""


class Clients:
    """The clients made for one cluster, by kind name, in the order they were made."""

    def __init__(
        self, cluster: ClusterConfig, config: CollectConfig, given: Mapping[str, Client] | None = None
    ) -> None:
        """`given`: clients to use instead of the real ones, by kind name (a kind missing from it
        has no client)."""
        self._cluster = cluster
        self._config = config
        self._given = given
        self._made: dict[str, Client | None] = {}
        self._started: list[Client] = []

    def make(self, kinds: Iterable[ClientKind[Any]]) -> None:
        """Make each kind not made yet (no connection: `start` connects)."""
        for kind in kinds:
            if kind.name in self._made:
                continue
            if self._given is not None:
                self._made[kind.name] = self._given.get(kind.name)
            else:
                self._made[kind.name] = kind.real(self._cluster, self._config)

    def get(self, kind: ClientKind[C]) -> C | None:
        """The client of `kind`, None when the cluster has none. A kind no job declared is a
        programming error: the job must name it in its `clients`."""
        if kind.name not in self._made:
            raise LookupError(f"no job of cluster {self._cluster.name} declared the {kind.name!r} client")
        return cast("C | None", self._made[kind.name])

    def start(self) -> None:
        """Start every client made, in order; raises ConfigError for a bad cluster config (the
        ones started before it are closed by `close`)."""
        for client in self._made.values():
            if client is not None and client not in self._started:
                client.start()
                self._started.append(client)

    def close(self) -> None:
        """Close every client started, the last started first; one failing does not keep the
        others open."""
        while self._started:
            client = self._started.pop()
            try:
                client.close()
            except (ConfigError, OSError, RuntimeError) as exc:  # closing must not stop the others
                log.warning("closing a Kafka client of cluster %s failed: %s", self._cluster.name, exc)

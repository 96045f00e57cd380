"""`ConsumerClient`: the life cycle shared by the readers built on one confluent-kafka Consumer
that never joins a group and never commits (`RecordTimestampReader`, `CommitStreamReader`).

The constructor takes the finished configuration and never connects; `start()` creates the
consumer (it connects on its first request); `close()` releases it. Every use of the consumer
holds `_lock`, so calls on one reader are serialised.
"""

from __future__ import annotations

import threading
from typing import Self

from confluent_kafka import Consumer, KafkaException

from monitor.core.settings import ClusterConfig
from monitor.kafka.properties import ClientLog, ClientValue, client_config, rejected_configuration


class ConsumerClient:
    """One consumer of one cluster, created by `start()` and released by `close()`."""

    def __init__(self, cluster: ClusterConfig, config: dict[str, ClientValue]) -> None:
        self._cluster = cluster
        self._config = config
        self._secrets = client_config(cluster).secret_values()
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        state = "started" if self._consumer is not None else "not started"
        return f"{type(self).__name__}(cluster={self._cluster.name!r}, {state})"

    def start(self) -> None:
        """Create the consumer (once). Raises ConfigError if librdkafka rejects the configuration."""
        with self._lock:
            if self._consumer is None:
                try:
                    self._consumer = Consumer(self._config, logger=ClientLog())
                except KafkaException as exc:
                    raise rejected_configuration(
                        exc, self._cluster.name, self._secrets, "the Kafka consumer"
                    ) from exc

    def close(self) -> None:
        """Close the consumer (it never joined a group and has nothing to commit); `_closed()`
        forgets what the reader knew about it."""
        with self._lock:
            consumer, self._consumer = self._consumer, None
            self._closed()
            if consumer is not None:
                consumer.close()

    def _closed(self) -> None:
        """Called under the lock as the consumer is released: a subclass drops its own state."""

    def _started(self) -> Consumer:
        """The consumer; call under the lock. Raises RuntimeError before `start()`."""
        if self._consumer is None:
            raise RuntimeError(f"{self!r}: call start() first")
        return self._consumer

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

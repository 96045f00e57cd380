"""kafka-python's own log, as lines that name the cluster and carry no traceback or secret.

kafka-python logs from its I/O thread, several lines for every failed connection attempt, and
with a traceback when a broker ends a TLS handshake mid-request (an untrusted client
certificate). The monitor reports such a failure itself, once per run, in one line naming the
cluster and what to check (`KafkaPythonClient._failed`, the run's error). So everything under the
`kafka` logger is re-logged to `monitor.kafka.python`:

- with the cluster named: the I/O thread is called `kafka-io-<client id>`, and the client id is
  `kafka-health-<cluster>` (`kafka_python_options`); a thread making a request says which
  cluster it asks (`asking`, called as each request connects);
- with an exception as its one-line text instead of a traceback;
- with the secrets of every cluster whose client was made in this process masked;
- at DEBUG for the connection layer (`kafka.net`) and for any record about a broker that cannot
  be reached (a connection error, a node not ready, or a request cancelled because its
  connection closed under it, as the metadata refresh logs at ERROR when a broker stops): the
  monitor reports those itself, a stopped broker as a finding;
- at DEBUG for its INFO records: from 3.0 on it says at INFO each time a client starts or stops
  its metadata refresh loop and each time the metadata is updated (a dozen lines at each start
  of the daemon), which the monitor's own log says better (`starting collect`, the runs);
  warnings and errors keep their level.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Final

from kafka.errors import Cancelled, KafkaConnectionError, NodeNotReadyError

from monitor.kafka.properties import scrub

TARGET: Final = logging.getLogger("monitor.kafka.python")
_SOURCE: Final = "kafka"
_CONNECTION_LAYER: Final = "kafka.net"
_THREAD_PREFIX: Final = "kafka-io-kafka-health-"
_UNREACHABLE: Final = (KafkaConnectionError, NodeNotReadyError, Cancelled)


class KafkaPythonLog(logging.Handler):
    """The handler on kafka-python's `kafka` logger (which no longer propagates)."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: dict[str, tuple[str, ...]] = {}
        self._guard = threading.Lock()

    def watch(self, cluster: str, secrets: Sequence[str]) -> None:
        with self._guard:
            self._secrets[cluster] = tuple(s for s in secrets if s)

    def emit(self, record: logging.LogRecord) -> None:
        quiet = record.levelno <= logging.INFO or _about_reaching(record)
        level = logging.DEBUG if quiet else record.levelno
        if not TARGET.isEnabledFor(level):
            return
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                error = record.exc_info[1]
                text = f"{text} ({type(error).__name__}: {error})"
            text = " ".join(text.split())
            with self._guard:
                secrets = [s for found in self._secrets.values() for s in found]
            cluster = _cluster_of(record.threadName) or getattr(_ASKING, "cluster", None)
            where = f"cluster {cluster!r}" if cluster else "a cluster"
            TARGET.log(level, "kafka-python on %s: %s", where, scrub(text, secrets))
        except Exception:
            self.handleError(record)


def _about_reaching(record: logging.LogRecord) -> bool:
    """Whether `record` is about reaching a broker, which the monitor reports itself."""
    if record.name.startswith(_CONNECTION_LAYER):
        return True
    args = record.args if isinstance(record.args, tuple) else ()
    error = record.exc_info[1] if record.exc_info else None
    return any(isinstance(arg, _UNREACHABLE) for arg in (*args, error))


def _cluster_of(thread: str | None) -> str | None:
    if thread and thread.startswith(_THREAD_PREFIX):
        return thread.removeprefix(_THREAD_PREFIX) or None
    return None


_ASKING: Final = threading.local()


def asking(cluster: str) -> None:
    """The calling thread makes kafka-python requests to `cluster` from now on."""
    _ASKING.cluster = cluster


_HANDLER: Final = KafkaPythonLog()
_INSTALL: Final = threading.Lock()


def route_kafka_python_log(cluster: str, secrets: Sequence[str]) -> None:
    """Re-log kafka-python's records as this module says (once per process), masking `secrets`
    of `cluster` from now on."""
    _HANDLER.watch(cluster, secrets)
    with _INSTALL:
        source = logging.getLogger(_SOURCE)
        if _HANDLER not in source.handlers:
            source.addHandler(_HANDLER)
            source.propagate = False

"""Client-library errors turned into text and into the named errors of `monitor.core.errors`.

- unavailable: the cluster, or the broker a request needs, did not answer (transport failure,
  timeout, no leader or coordinator right now). Retrying later may succeed.
- refused: a broker answered and refused (unknown topic, authorisation, invalid request ...).
- end offset held back: a partition's leader answered ListOffsets but cannot give the latest
  offset while its high watermark is held back (under min ISR); its own outcome, not a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Final, Protocol

from confluent_kafka import KafkaError, KafkaException

from monitor.core.errors import (
    KafkaAuthenticationError,
    KafkaRequestError,
    KafkaUnavailableError,
    MonitorError,
)
from monitor.core.settings import ClusterConfig
from monitor.kafka.properties import ClientConfig, scrub

# A future is only a backstop: librdkafka enforces `request_timeout` itself and fails the
# request first; the extra seconds cover its queueing and callback delivery.
FUTURE_GRACE_SECONDS: Final = 5.0

UNAVAILABLE_CODES: Final = frozenset(
    {
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
        KafkaError._TIMED_OUT_QUEUE,
        KafkaError._MSG_TIMED_OUT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._DESTROY,
        KafkaError._DESTROY_BROKER,
        KafkaError._WAIT_COORD,
        KafkaError._UNKNOWN_BROKER,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.BROKER_NOT_AVAILABLE,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.NOT_CONTROLLER,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


SECURITY_CODES: Final = frozenset(
    {KafkaError._AUTHENTICATION, KafkaError._SSL, KafkaError.SASL_AUTHENTICATION_FAILED}
)


def is_security_failure(error: KafkaError) -> bool:
    """True when librdkafka reports that a broker rejected the client's credentials or its TLS
    handshake. A broker that rejects the client certificate ends the handshake with an alert
    that librdkafka reports only as a transport failure with OpenSSL's text in it."""
    return error.code() in SECURITY_CODES or (
        error.code() == KafkaError._TRANSPORT and "SSL routines" in error.str()
    )


def kafka_error(exc: BaseException) -> KafkaError | None:
    """The librdkafka error inside a client exception, if there is one."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def is_unknown_topic(exc: BaseException) -> bool:
    """True when `exc` is the broker's "unknown topic or partition"."""
    error = kafka_error(exc)
    return error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def is_unavailable(exc: BaseException) -> bool:
    """True when `exc` means "no answer" rather than "refused"."""
    if isinstance(exc, TimeoutError):
        return True
    error = kafka_error(exc)
    return error is not None and error.code() in UNAVAILABLE_CODES


def is_end_offset_held_back(exc: BaseException) -> bool:
    """True when a leader answered that it cannot give the end offset now: OFFSET_NOT_AVAILABLE,
    "leader high watermark is not caught up" (Kafka 4 holds the high watermark of a partition
    under min ISR back). Neither "unavailable" nor "refused": the partition is there and answers
    again once its ISR is back (`monitor.core.records.EndOffsetHeldBack`)."""
    error = kafka_error(exc)
    return error is not None and error.code() == KafkaError.OFFSET_NOT_AVAILABLE


def reason(exc: BaseException, secrets: Sequence[str], timeout: float | None = None) -> str:
    """What the client said about one failure, with the error's name, secrets masked."""
    error = kafka_error(exc)
    if error is not None:
        text = f"{error.str()} ({error.name()})"
    elif isinstance(exc, TimeoutError):
        text = "no answer within the timeout" if timeout is None else f"no answer within {timeout:g}s"
    else:
        text = str(exc) or type(exc).__name__
    return scrub(text, secrets)


class Outcome:
    """The tally of one request over many entities (partitions, groups, topics, brokers).

    Each entity either answered or failed with a message. The request as a whole failed when
    nothing answered and every failure was "unavailable": then the cluster did not answer and
    `unreachable()` returns the exception to raise; otherwise the caller returns a `Partial`.
    """

    def __init__(
        self,
        secrets: Sequence[str],
        timeout: float,
        unavailable: Callable[[BaseException], bool] = is_unavailable,
    ) -> None:
        self._secrets = secrets
        self._timeout = timeout
        self._is_unavailable = unavailable
        self.errors: dict[str, str] = {}
        self.answered = 0
        self._unavailable: BaseException | None = None
        self._refused = False

    def success(self) -> None:
        self.answered += 1

    def failure(self, key: str, exc: BaseException) -> None:
        self.errors[key] = reason(exc, self._secrets, self._timeout)
        if self._is_unavailable(exc):
            self._unavailable = self._unavailable or exc
        else:
            self._refused = True

    def unanswered(self, key: str, text: str) -> None:
        """An entity without an answer for a reason `text` explains: counts as unavailable."""
        self.errors[key] = text
        self._unavailable = self._unavailable or TimeoutError(text)

    def unreachable(self) -> BaseException | None:
        if self.answered or self._refused:
            return None
        return self._unavailable


class CallOwner(Protocol):
    """What `KafkaCall` needs from the client it guards (`KafkaAdmin`)."""

    _generation: int

    @property
    def cluster(self) -> ClusterConfig: ...

    @property
    def config(self) -> ClientConfig: ...

    @property
    def timeout(self) -> float: ...

    def _renew(self, generation: int) -> None: ...

    def _drain_logs(self) -> None: ...

    def security_failure(self, since: float) -> str | None: ...


class KafkaCall:
    """Context manager around one client request: translates its errors, drains client logs.

    Usage: `with self._call("describe topics") as call: ... future.result(timeout=call.remaining())`.
    """

    def __init__(self, admin: CallOwner, action: str) -> None:
        self._admin = admin
        self._action = action
        self._generation = admin._generation
        self._started = time.monotonic()
        self._deadline = self._started + admin.timeout + FUTURE_GRACE_SECONDS

    def remaining(self) -> float:
        """Seconds left for waiting on futures, never negative."""
        return max(0.0, self._deadline - time.monotonic())

    def __enter__(self) -> KafkaCall:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._admin._drain_logs()
        if exc is None or isinstance(exc, MonitorError):
            return
        if isinstance(exc, KafkaException):
            error = self._translate(exc)
        elif isinstance(exc, TimeoutError):
            error = KafkaUnavailableError(
                f"{self._where()}: no answer within {self._admin.timeout:g}s; "
                f"check that {self._servers()} are up and reachable"
            )
        else:
            return
        if isinstance(error, KafkaUnavailableError):
            error = self._rejected() or error
        if isinstance(error, KafkaUnavailableError):
            self._admin._renew(self._generation)
        try:
            raise error from exc
        finally:
            # The raised error's traceback holds this frame: without this the two form a cycle
            # that keeps the original exception, its frames and the client in them alive until
            # the next garbage collection.
            del error

    def _rejected(self) -> KafkaAuthenticationError | None:
        """The clear error when, during this request, a broker rejected the client's credentials
        or certificate: that, not "no answer", is why the request failed."""
        failure = self._admin.security_failure(self._started)
        if failure is None:
            return None
        return KafkaAuthenticationError(
            f"{self._where()}: the brokers rejected the client's credentials or certificate: "
            f"{scrub(failure, self._admin.config.secret_values())}; check "
            f"clusters.{self._admin.cluster.name}.security (protocol, SASL user name and password, "
            "CA, client certificate and key)"
        )

    def _where(self) -> str:
        return f"cannot {self._action} on cluster {self._admin.cluster.name!r}"

    def _servers(self) -> str:
        return ", ".join(self._admin.cluster.bootstrap_servers)

    def _translate(self, exc: KafkaException) -> MonitorError:
        error = kafka_error(exc)
        secrets = self._admin.config.secret_values()
        if error is None:
            return KafkaRequestError(scrub(f"{self._where()}: {exc}", secrets))
        reason = scrub(f"{error.str()} ({error.name()})", secrets)
        if error.code() in UNAVAILABLE_CODES:
            return KafkaUnavailableError(
                f"{self._where()}: {reason}; check that {self._servers()} are up and reachable"
            )
        return KafkaRequestError(f"{self._where()}: the cluster refused the request: {reason}")

"""Prometheus remote write (protocol 1.0): a `WriteRequest` protobuf, snappy block-compressed,
POSTed to the target's URL.

Failure policy, as the protocol asks of a sender:
- 2xx: the batch is stored;
- 5xx, 429 and transport errors (refused, reset, timeout): retried with exponential backoff
  within the push's time, then the batch stays queued and the next push sends it first;
- any other 4xx: the receiver will never take the batch (bad labels, samples out of order or out
  of bounds): it is dropped and the answer logged;
- the queue holds `queue_max_batches`; beyond that the oldest batch is dropped (and counted), so
  an endpoint that is away for hours costs bounded memory.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib.metadata import version

import cramjam
import httpx
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from tenacity import (
    RetryError,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from monitor.core.formatting import printable
from monitor.core.settings import RemoteWriteTarget
from monitor.expose.metrics.push.metrics import PUSH_FAILURES, PUSH_QUEUE, PUSH_SAMPLES
from monitor.expose.metrics.push.series import Series

log = logging.getLogger(__name__)

PROTOCOL_VERSION = "0.1.0"
"""The `X-Prometheus-Remote-Write-Version` of protocol 1.0."""


def _message_classes() -> tuple[type[Message], type[Message], type[Message], type[Message]]:
    """WriteRequest, TimeSeries, Label and Sample of prometheus/prompb/{remote,types}.proto (the
    fields a sender of samples uses), built from a descriptor so no generated code is needed."""
    proto = descriptor_pb2.FileDescriptorProto(
        name="kafka_health_prompb.proto", package="prometheus", syntax="proto3"
    )
    string, double, int64, message = 9, 1, 3, 11
    optional, repeated = 1, 3

    def add(name: str, fields: Sequence[tuple[str, int, int, int, str]]) -> None:
        spec = proto.message_type.add(name=name)
        for field_name, number, kind, label, type_name in fields:
            field = spec.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:
                field.type_name = type_name

    add("Label", [("name", 1, string, optional, ""), ("value", 2, string, optional, "")])
    add("Sample", [("value", 1, double, optional, ""), ("timestamp", 2, int64, optional, "")])
    add(
        "TimeSeries",
        [
            ("labels", 1, message, repeated, ".prometheus.Label"),
            ("samples", 2, message, repeated, ".prometheus.Sample"),
        ],
    )
    add("WriteRequest", [("timeseries", 1, message, repeated, ".prometheus.TimeSeries")])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    get = message_factory.GetMessageClass
    return (
        get(pool.FindMessageTypeByName("prometheus.WriteRequest")),
        get(pool.FindMessageTypeByName("prometheus.TimeSeries")),
        get(pool.FindMessageTypeByName("prometheus.Label")),
        get(pool.FindMessageTypeByName("prometheus.Sample")),
    )


WriteRequest, TimeSeries, Label, Sample = _message_classes()


def encode(series: Sequence[Series], timestamp_ms: int, external_labels: dict[str, str]) -> bytes:
    """The snappy-compressed WriteRequest carrying one sample of each series at `timestamp_ms`.
    Labels are sorted by name, `__name__` first of all, as the protocol requires."""
    request = WriteRequest()
    for one in series:
        labels = dict(one.labels)
        for name, value in external_labels.items():
            labels.setdefault(name, value)
        ts = request.timeseries.add()  # type: ignore[attr-defined]
        ts.labels.add(name="__name__", value=one.name)
        for name in sorted(labels):
            ts.labels.add(name=name, value=labels[name])
        ts.samples.add(value=one.value, timestamp=timestamp_ms)
    return bytes(cramjam.snappy.compress_raw(request.SerializeToString()))


def decode(body: bytes) -> list[tuple[dict[str, str], list[tuple[float, int]]]]:
    """The series of a snappy-compressed WriteRequest: (labels, [(value, timestamp_ms)])."""
    request = WriteRequest()
    request.ParseFromString(bytes(cramjam.snappy.decompress_raw(body)))
    return [
        ({label.name: label.value for label in ts.labels}, [(s.value, s.timestamp) for s in ts.samples])
        for ts in request.timeseries  # type: ignore[attr-defined]
    ]


class Outcome(StrEnum):
    """What happened to one batch on one attempt to send it."""

    SENT = "sent"
    RETRY = "retry"
    """5xx, 429 or a transport error: worth sending again."""
    REFUSED = "refused"
    """Another 4xx: the receiver will never take it."""


class _Retriable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Batch:
    payload: bytes
    samples: int


class RemoteWriter:
    """Sends the series of each push to one remote-write target, keeping what it could not send."""

    def __init__(self, target: RemoteWriteTarget, client: httpx.Client | None = None) -> None:
        self.target = target
        self._queue: deque[Batch] = deque()
        self._lock = threading.Lock()
        headers = {name: secret.get_secret_value() for name, secret in target.headers.items()}
        headers.update(
            {
                "Content-Encoding": "snappy",
                "Content-Type": "application/x-protobuf",
                "User-Agent": f"kafka-health/{_own_version()}",
                "X-Prometheus-Remote-Write-Version": PROTOCOL_VERSION,
            }
        )
        auth = None
        if target.basic_auth_username is not None:
            password = target.basic_auth_password.get_secret_value() if target.basic_auth_password else ""
            auth = httpx.BasicAuth(target.basic_auth_username, password)
        self._client = client or httpx.Client(timeout=target.timeout_seconds, headers=headers, auth=auth)
        PUSH_QUEUE.labels(target.name).set(0)

    def close(self) -> None:
        self._client.close()

    @property
    def queued(self) -> int:
        return len(self._queue)

    def push(self, series: Sequence[Series], timestamp_ms: int) -> int:
        """Queue one sample of every series at `timestamp_ms`, then send the queue oldest first.
        Returns the number of samples the target accepted in this call."""
        with self._lock:  # one push at a time per target: order matters to the receiver
            if series:
                self._enqueue(Batch(encode(series, timestamp_ms, self.target.external_labels), len(series)))
            sent = self._drain()
            PUSH_QUEUE.labels(self.target.name).set(len(self._queue))
            return sent

    def _enqueue(self, batch: Batch) -> None:
        while len(self._queue) >= self.target.queue_max_batches:
            dropped = self._queue.popleft()
            PUSH_SAMPLES.labels(self.target.name, "dropped").inc(dropped.samples)
            log.warning(
                "push %s: queue full (%d batches); dropped the oldest (%d samples). The endpoint "
                "has been away for a while: check %s, or raise queue_max_batches",
                self.target.name, self.target.queue_max_batches, dropped.samples, self.target.url,
            )  # fmt: skip
        self._queue.append(batch)

    def _drain(self) -> int:
        sent = 0
        while self._queue:
            batch = self._queue[0]
            outcome = self._send(batch)
            if outcome is Outcome.RETRY:
                return sent  # kept; the next push sends it first
            self._queue.popleft()
            if outcome is Outcome.SENT:
                sent += batch.samples
                PUSH_SAMPLES.labels(self.target.name, "sent").inc(batch.samples)
            else:
                PUSH_SAMPLES.labels(self.target.name, "dropped").inc(batch.samples)
        return sent

    def _send(self, batch: Batch) -> Outcome:
        budget = max(self.target.timeout_seconds, 1.0)
        retrying = Retrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, _Retriable)),
            stop=stop_after_attempt(4) | stop_after_delay(budget * 3),
            wait=wait_exponential(multiplier=0.25, max=5),
            reraise=False,
        )
        try:
            for attempt in retrying:
                with attempt:
                    return self._post(batch)
        except RetryError as exc:
            last = exc.last_attempt.exception()
            reason = last.reason if isinstance(last, _Retriable) else "other"
            log.warning(
                "push %s: %s did not take %d samples (%s); kept for the next push",
                self.target.name, self.target.url, batch.samples, reason,
            )  # fmt: skip
            return Outcome.RETRY
        raise AssertionError("unreachable: Retrying either returns or raises")

    def _post(self, batch: Batch) -> Outcome:
        try:
            response = self._client.post(self.target.url, content=batch.payload)
        except httpx.TimeoutException as exc:
            PUSH_FAILURES.labels(self.target.name, "timeout").inc()
            raise _Retriable("timeout") from exc
        except httpx.TransportError as exc:
            PUSH_FAILURES.labels(self.target.name, "connection").inc()
            raise _Retriable(f"connection: {type(exc).__name__}") from exc
        status = response.status_code
        if 200 <= status < 300:
            return Outcome.SENT
        reason = f"http_{status}"
        PUSH_FAILURES.labels(self.target.name, reason).inc()
        if status == 429 or status >= 500:
            raise _Retriable(reason)
        log.error(
            "push %s: %s refused %d samples with %d: %s (dropped: a receiver does not take them on a "
            "retry)",
            self.target.name, self.target.url, batch.samples, status, printable(response.text[:300]),
        )  # fmt: skip
        return Outcome.REFUSED


def _own_version() -> str:
    try:
        return version("kafka-health")
    except Exception:  # running from a checkout without metadata
        return "dev"

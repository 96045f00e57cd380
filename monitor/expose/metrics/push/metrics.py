"""This process's counters of its pushes (served on `/metrics`, listed in the catalogue)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

PUSH_SAMPLES = Counter(
    "kafka_health_push_samples_total",
    "Samples pushed by target and outcome (sent; dropped: refused by the target or pushed out of a "
    "full queue).",
    ["target", "outcome"],
)
PUSH_FAILURES = Counter(
    "kafka_health_push_failures_total",
    "Failed push attempts by target and reason (http_<status>, timeout, connection, credentials).",
    ["target", "reason"],
)
PUSH_QUEUE = Gauge(
    "kafka_health_push_queue_batches",
    "Batches a remote-write target has not taken yet (sent first at the next push).",
    ["target"],
)

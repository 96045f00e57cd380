"""DescribeLogDirs through kafka-python, the one client that has it (librdkafka does not).

Sizes are per replica per broker (a partition with three replicas appears three times, once per
broker): nothing is summed here. Total and usable bytes of each log dir's volume come from
DescribeLogDirs v4+ (Kafka 3.3+), None from older brokers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import kafka.errors

from monitor.core.records import LogDirReplica, LogDirUsage, Partial
from monitor.core.settings import ClusterConfig
from monitor.kafka.protocol import LogDirs
from monitor.kafka.pyclient import KafkaPythonClient, kafka_python_options, unavailable
from monitor.kafka.translate import Outcome

__all__ = ["LogDirClient", "LogDirs", "describe_log_dirs", "kafka_python_options", "log_dirs_of"]


def _error_name(code: int) -> str | None:
    return None if code == 0 else kafka.errors.for_code(code).__name__


def log_dirs_of(broker_id: int, results: Sequence[Mapping[str, Any]]) -> LogDirs:
    """One broker's DescribeLogDirs results (kafka-python's dicts) as records."""
    replicas: list[LogDirReplica] = []
    usages: list[LogDirUsage] = []
    for result in results:
        log_dir = str(result["log_dir"])
        total, usable = int(result.get("total_bytes", -1)), int(result.get("usable_bytes", -1))
        usages.append(
            LogDirUsage(
                broker_id=broker_id,
                log_dir=log_dir,
                total_bytes=total if total >= 0 else None,
                usable_bytes=usable if usable >= 0 else None,
                error=_error_name(int(result.get("error_code", 0))),
            )
        )
        for topic in result.get("topics") or []:
            for partition in topic.get("partitions") or []:
                replicas.append(
                    LogDirReplica(
                        broker_id=broker_id,
                        log_dir=log_dir,
                        topic=str(topic["name"]),
                        partition=int(partition["partition_index"]),
                        size_bytes=int(partition["partition_size"]),
                        offset_lag=int(partition["offset_lag"]),
                        is_future=bool(partition["is_future_key"]),
                    )
                )
    replicas.sort(key=lambda r: (r.topic, r.partition, r.log_dir))
    return replicas, usages


class LogDirClient(KafkaPythonClient):
    """DescribeLogDirs for one cluster (see `KafkaPythonClient` for the client's lifecycle)."""

    def describe(self, broker_ids: Sequence[int]) -> Partial[LogDirs]:
        """Replica sizes and log-dir volumes of each broker in `broker_ids`, asked one by one.

        Blocks for one metadata request plus one DescribeLogDirs request per broker, each bounded
        by `request_timeout_seconds` (a first call also connects, bounded the same way). A broker
        that fails is in `errors` as "broker:<id>" and the others are returned. Raises
        KafkaUnavailableError when the cluster cannot be reached or no broker answered, and
        KafkaRequestError when the cluster refuses the client.
        """
        replicas: list[LogDirReplica] = []
        usages: list[LogDirUsage] = []
        outcome = Outcome(self._options.secret_values(), self.timeout, unavailable)
        with self._lock:
            self._require_started()
            client = self._connect().admin
            try:
                topics = {
                    str(t["name"]): [int(p["partition_index"]) for p in t["partitions"]]
                    for t in client.describe_topics()
                    if not t.get("error_code")
                }
            except Exception as exc:
                raise self._failed("list topics for log dirs", exc) from exc
            for broker_id in dict.fromkeys(broker_ids):
                try:
                    answers = client.describe_log_dirs(topic_partitions=topics, brokers=[broker_id])
                except Exception as exc:
                    outcome.failure(f"broker:{broker_id}", exc)
                    continue
                for answer in answers:
                    found = log_dirs_of(int(answer["broker"]), answer["log_dirs"])
                    replicas.extend(found[0])
                    usages.extend(found[1])
                outcome.success()
            failure = outcome.unreachable()
            if failure is not None:
                raise self._failed("describe log dirs", failure) from failure
        return Partial((replicas, usages), outcome.errors)


def describe_log_dirs(cluster: ClusterConfig, broker_ids: Sequence[int]) -> Partial[LogDirs]:
    """One-off `LogDirClient(cluster).describe(broker_ids)`: connects, asks, closes."""
    with LogDirClient(cluster) as client:
        return client.describe(broker_ids)

"""What the guardrails need to know about a topic, gathered from Kafka and PostgreSQL.

- current retention.ms / retention.bytes and where they come from, and each partition's replicas:
  asked from Kafka now (a value collected a minute ago may already have changed); when Kafka does
  not answer, the newest collected values (`topic_configs`, `partitions`) stand in, so a request
  can still be made (and waits to be applied until Kafka is back);
- produce bytes/s per partition: the newest evaluation (`retention_headroom`);
- each broker's disk: the newest `broker_disks` sample of each log dir, summed per broker;
- lagging groups and their time until data loss (`group_partition_lag`), for the button page;
- the topic's open request, if any.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from monitor.act.guardrails import MANAGED_CONFIGS, BrokerDisk, PartitionFacts, TopicFacts
from monitor.act.ledger import open_request_id
from monitor.core.errors import KafkaUnavailableError
from monitor.core.owners import Owners
from monitor.kafka.alter import TopicConfigWriter

log = logging.getLogger(__name__)

DISK_SAMPLE_MAX_AGE = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class CurrentConfig:
    value: int
    source: str
    """Kafka's name for where the value comes from (DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG ...)."""


@dataclass(frozen=True, slots=True)
class Gathered:
    facts: TopicFacts
    configs: dict[str, CurrentConfig]
    live: bool
    """False when Kafka did not answer and the collected values stood in."""


def read_current(
    writer: TopicConfigWriter, topic: str
) -> tuple[dict[str, CurrentConfig], list[PartitionFacts]]:
    """Current configs and partitions from Kafka. Raises KafkaUnavailableError / KafkaRequestError."""
    entries = writer.read_configs(topic, MANAGED_CONFIGS)
    configs = {
        name: CurrentConfig(int(entry.value), entry.source)
        for name, entry in entries.items()
        if entry.value is not None
    }
    (info,) = writer.describe_topics([topic])
    partitions = [PartitionFacts(p.partition, tuple(p.replicas)) for p in info.partitions]
    return configs, partitions


def collected_current(
    conn: Connection, cluster: str, topic: str
) -> tuple[dict[str, CurrentConfig], list[PartitionFacts]]:
    """The newest collected configs and partitions (when Kafka does not answer)."""
    rows = conn.execute(
        text(
            "SELECT name, value, source FROM topic_configs WHERE cluster = :c AND topic = :t"
            " AND valid_to IS NULL AND name = ANY(:names)"
        ),
        {"c": cluster, "t": topic, "names": list(MANAGED_CONFIGS)},
    )
    configs = {r.name: CurrentConfig(int(r.value), r.source) for r in rows if r.value is not None}
    parts = conn.execute(
        text(
            "SELECT partition, replicas FROM partitions WHERE cluster = :c AND topic = :t ORDER BY partition"
        ),
        {"c": cluster, "t": topic},
    )
    return configs, [PartitionFacts(int(r.partition), tuple(r.replicas)) for r in parts]


def produce_rates(conn: Connection, cluster: str, topic: str) -> dict[int, float]:
    rows = conn.execute(
        text(
            "SELECT partition, produce_bytes_rate FROM retention_headroom"
            " WHERE cluster = :c AND topic = :t AND produce_bytes_rate IS NOT NULL"
        ),
        {"c": cluster, "t": topic},
    )
    return {int(r.partition): float(r.produce_bytes_rate) for r in rows}


def broker_disks(conn: Connection, cluster: str, now: datetime) -> dict[int, BrokerDisk]:
    rows = conn.execute(
        text(
            "SELECT broker_id, sum(total_bytes) AS total, sum(usable_bytes) AS usable FROM ("
            "  SELECT DISTINCT ON (broker_id, log_dir) broker_id, total_bytes, usable_bytes"
            "  FROM broker_disks WHERE cluster = :c AND sampled_at >= :since AND total_bytes IS NOT NULL"
            "  ORDER BY broker_id, log_dir, sampled_at DESC"
            ") newest GROUP BY broker_id"
        ),
        {"c": cluster, "since": now - DISK_SAMPLE_MAX_AGE},
    )
    return {int(r.broker_id): BrokerDisk(int(r.broker_id), int(r.total), int(r.usable or 0)) for r in rows}


def lagging_groups(conn: Connection, cluster: str, topic: str) -> list[dict[str, Any]]:
    """Groups lagging on the topic, the most urgent first (data lost, then the smallest data-loss
    margin, then the soonest deletion): offset lag, lag in seconds, the time until the oldest
    unconsumed message is deleted and the data-loss margin (that time minus the time the group
    needs to read its backlog; null when the group reads it first)."""
    rows = conn.execute(
        text(
            "SELECT group_id, sum(offset_lag) AS offset_lag, max(lag_seconds) AS lag_seconds,"
            " min(time_until_data_loss_seconds) AS time_until_data_loss_seconds,"
            " min(data_loss_margin_seconds) AS data_loss_margin_seconds,"
            " bool_or(coalesce(data_loss_occurred, false)) AS data_loss_occurred"
            " FROM group_partition_lag WHERE cluster = :c AND topic = :t AND offset_lag > 0"
            " GROUP BY group_id ORDER BY bool_or(coalesce(data_loss_occurred, false)) DESC,"
            " min(data_loss_margin_seconds) NULLS LAST, min(time_until_data_loss_seconds) NULLS LAST,"
            " group_id"
        ),
        {"c": cluster, "t": topic},
    )
    return [dict(r._mapping) for r in rows]


def gather(
    conn: Connection, writer: TopicConfigWriter, owners: Owners, cluster: str, topic: str, now: datetime
) -> Gathered:
    """Everything the guardrails need. Raises KafkaRequestError for a topic Kafka does not know,
    and KafkaUnavailableError when Kafka does not answer and nothing was collected either."""
    live = True
    try:
        configs, partitions = read_current(writer, topic)
    except KafkaUnavailableError as exc:
        configs, partitions = collected_current(conn, cluster, topic)
        if not configs or not partitions:
            raise KafkaUnavailableError(
                f"{exc}; and nothing has been collected about topic {topic!r} yet, so its current "
                "retention is unknown: try again when the cluster answers"
            ) from exc
        log.warning("cluster %s did not answer; using the collected configs of %s", cluster, topic)
        live = False
    rates = produce_rates(conn, cluster, topic)
    partitions = [PartitionFacts(p.partition, p.replicas, rates.get(p.partition)) for p in partitions]
    owner = owners.topic_owner(topic)
    facts = TopicFacts(
        cluster=cluster,
        topic=topic,
        owner=owner.name if owner else None,
        current={name: c.value for name, c in configs.items()},
        partitions=tuple(partitions),
        brokers=broker_disks(conn, cluster, now),
        open_request=open_request_id(conn, cluster, topic),
    )
    return Gathered(facts, configs, live)

"""Every metric `/metrics` serves: name, type, labels, meaning (DOMAIN.md's definitions) and
origin. This is the one source: the state collector builds its families from it, `docs/metrics.md`
is generated from it (`python -m monitor.expose.metrics.catalogue > docs/metrics.md`), and a test
checks a real scrape against it.

Origins:
- `kafka-lag-go`: name, type and labels of sciclon2/kafka-lag-go (`pkg/metrics/prometheus.go`),
  so dashboards built for it keep working. Its label `clustername` is served beside our `cluster`
  (same value, no extra series). Where our value is measured differently, the meaning says so.
- `kminion`: the end-to-end probe's measures under the names and types of redpanda-data/kminion's
  end-to-end monitoring (`e2e/service.go`): latency histograms of every probe message and
  counters of messages and commits, with KMinion's `partition_id` label beside `cluster` and
  `broker` (the broker the partition probes). They are process metrics, observed by the probe
  rounds of the daemon that holds the cluster's lease; KMinion's commit metrics are per group
  coordinator, these per cluster.
- `ours`: kafka-health's own, prefixed `kafka_health_`.
- `prometheus_client`: the client library's process and Python collectors.

State metrics (`query` set) are read from the SQL views (`VIEWS`) once per evaluation into the
snapshot a scrape serves (`snapshot.py`); `column` is the column of that query
(`monitor/expose/metrics/state_queries.py`) holding the value. Process metrics (`query`
None) are this process's counters since it started.
"""

from __future__ import annotations

import sys

from monitor.expose.metrics.spec import (
    BROKER,
    CLUSTER,
    GROUP,
    GROUP_TOPIC,
    KLG_GROUP,
    KLG_GROUP_PARTITION,
    KLG_GROUP_TOPIC,
    OBJECTIVE,
    PARTITION,
    TOPIC,
)
from monitor.expose.metrics.spec import MetricSpec as MetricSpec
from monitor.expose.metrics.spec import klg as _klg
from monitor.expose.metrics.spec import ours as _ours

_SECONDS_LAG = (
    "age of the oldest unconsumed message, now - append_time(committed); 0 when caught up. Exact "
    "where the record at `committed` was read, interpolated from the end-offset history otherwise "
    "(kafka-lag-go always interpolates, and clamps at its history's age)"
)

COMPATIBLE: tuple[MetricSpec, ...] = (
    _klg("kafka_consumer_group_lag_in_offsets", KLG_GROUP_PARTITION, "group_partition", "offset_lag",
         "Offset lag of the group on the partition: max(end - committed, 0). Partition-level."),
    _klg("kafka_consumer_group_lag_in_seconds", KLG_GROUP_PARTITION, "group_partition", "lag_seconds",
         f"Lag in seconds of the group on the partition: {_SECONDS_LAG}. Partition-level."),
    _klg("kafka_consumer_group_max_lag_in_offsets", KLG_GROUP, "group", "max_offset_lag",
         "Largest partition offset lag of the group."),
    _klg("kafka_consumer_group_max_lag_in_seconds", KLG_GROUP, "group", "max_lag_seconds",
         "Largest partition lag in seconds of the group: the age of its oldest unconsumed message."),
    _klg("kafka_consumer_group_sum_lag_in_offsets", KLG_GROUP, "group", "offset_lag",
         "Offset lag of the group summed over its partitions."),
    _klg("kafka_consumer_group_sum_lag_in_seconds", KLG_GROUP, "group", "sum_lag_seconds",
         "Lag in seconds summed over the group's partitions (kafka-lag-go's definition; a sum of "
         "ages, kept for its dashboards: alert on the max)."),
    _klg("kafka_consumer_group_topic_max_lag_in_offsets", KLG_GROUP_TOPIC, "group_topic", "max_offset_lag",
         "Largest partition offset lag of the group on the topic."),
    _klg("kafka_consumer_group_topic_max_lag_in_seconds", KLG_GROUP_TOPIC, "group_topic", "max_lag_seconds",
         "Largest partition lag in seconds of the group on the topic."),
    _klg("kafka_consumer_group_topic_sum_lag_in_offsets", KLG_GROUP_TOPIC, "group_topic", "offset_lag",
         "Offset lag of the group on the topic, summed over its partitions."),
    _klg("kafka_consumer_group_topic_sum_lag_in_seconds", KLG_GROUP_TOPIC, "group_topic", "sum_lag_seconds",
         "Lag in seconds of the group on the topic, summed over its partitions (kafka-lag-go's definition)."),
    _klg("kafka_total_groups_checked", ("cluster", "clustername"), "cluster", "groups",
         "Consumer groups in the cluster's latest evaluation."),
)  # fmt: skip

GROUPS: tuple[MetricSpec, ...] = (
    _ours("group_topic_append_lag_seconds", GROUP_TOPIC, "group_topic", "append_lag_seconds",
          "Append lag (New Relic's definition): append_time(end - 1) - append_time(committed - 1), the "
          "largest over the topic's partitions. Keeps growing while producers produce, even if every "
          "consumer died: alert on this one."),
    _ours("group_topic_commit_lag_seconds", GROUP_TOPIC, "group_topic", "commit_lag_seconds",
          "Commit lag: commit time - append_time(committed - 1) at the last observed commit (error <= one "
          "collection interval), the largest over the partitions: how long the last committed message sat "
          "in Kafka before it was processed. Absent until the monitor has observed a commit of the group."),
    _ours("group_topic_time_since_last_commit_seconds", GROUP_TOPIC, "group_topic",
          "time_since_last_commit_seconds",
          "Seconds since the group last committed on the topic. Absent until the monitor has observed a "
          "commit of the group (its committed offset changing between collections, or the commits stream)."),
    _ours("group_topic_time_until_data_loss_seconds", GROUP_TOPIC, "group_topic",
          "time_until_data_loss_seconds",
          "Time until retention deletes the oldest unconsumed message (the earlier of the retention.ms and "
          "retention.bytes limits; deletion is per segment, so it can come up to one segment earlier), the "
          "smallest over the partitions. Absent when nothing is at risk."),
    _ours("group_topic_data_loss_occurred", GROUP_TOPIC, "group_topic", "data_loss_occurred",
          "1 when committed < log start offset on a partition: messages were deleted before the group "
          "read them."),
    _ours("group_members", GROUP, "group", "members", "Members of the consumer group."),
    _ours("group_consumers_needed", GROUP, "group", "consumers_needed",
          "Consumer advice: the consumers the lagging group needs to read its backlog, and what arrives "
          "meanwhile, before retention deletes unread messages (or within 30 min when no deletion is "
          "ahead), at the rate one of its consumers read over the evaluation window; at most its "
          "partitions. Absent when the group is not lagging, has no consume rate yet or no member (start "
          "its consumers first). For autoscalers: docs/keda.md."),
    *(_ours(f"group_{forecast}", GROUP, "group", forecast, meaning) for forecast, meaning in (
        ("time_to_catch_up_seconds", "Catch-up forecast: seconds until the group has read its backlog at "
         "the consume and produce rates of the evaluation window (offset lag / (consume - produce), its "
         "slowest partition's); 0 when caught up. Absent when a lagging partition does not gain on its "
         "producers."),
        ("catching_up", "1 when every lagging partition of the group gains on its producers, 0 when one "
         "does not. Absent when the group is caught up or its rates are not known yet."),
    )),
    _ours("group_status", (*GROUP, "status"), "group", "one",
          "1, labelled with the group's sliding-window status (Burrow's rules without false STOPs; WARN: "
          "falling behind): OK, "
          "WARN or ERR (ERR covers STOP, STALL and REWIND)."),
    _ours("group_state", (*GROUP, "state"), "group", "one",
          "1, labelled with the consumer group state: Stable, PreparingRebalance, CompletingRebalance, "
          "Empty, Dead or Unknown."),
)  # fmt: skip


def _objective(name: str, column: str, meaning: str, window: bool = False) -> MetricSpec:
    """`kafka_health_lag_objective_<name>` per (cluster, group, objective[, burn-rate window])."""
    labels, query = ((*OBJECTIVE, "window"), "objective_burn") if window else (OBJECTIVE, "objective")
    return _ours(f"lag_objective_{name}", labels, query, column, meaning)


OBJECTIVES: tuple[MetricSpec, ...] = (
    _objective("budget_remaining", "budget_remaining", "Fraction of the lag objective's error budget "
               "(window_days of minutes x (1 - target)) the group has not spent: 1 untouched, 0 spent, "
               "negative overspent."),
    _objective("compliance_ratio", "compliance_ratio", "Fraction of the group's recorded minutes over the "
               "window_days that were good (lag at most lag_seconds). Absent before any is recorded."),
    _objective("target_ratio", "target_ratio", "The objective's target as a fraction (99.5 % is 0.995)."),
    _objective("bad_minutes", "bad_minutes", "Bad minutes of the group over the objective's window_days."),
    _objective("burn_rate", "burn_rate", "Bad-minute fraction over the window (5m, 30m, 1h, 6h, 3d) / the "
               "budget fraction (1 - target): 1 spends the budget exactly over window_days (the alerts page "
               "at 14.4 over 1h and 5m). Absent before any minute of the window is recorded.", window=True),
)  # fmt: skip

PARTITIONS: tuple[MetricSpec, ...] = (
    _ours("partition_retention_headroom_bytes", PARTITION, "partition", "headroom_bytes",
          "retention.bytes - size of the leader replica. Absent when retention.bytes is unlimited. "
          "Partition-level."),
    _ours("partition_retention_shortfall_seconds", PARTITION, "partition", "retention_shortfall_seconds",
          "retention.ms - time coverage when retention.bytes deletes first (\"we thought we kept 2 hours, "
          "we keep 10 minutes\"), else 0. Partition-level."),
    _ours("partition_time_until_data_loss_seconds", PARTITION, "partition",
          "min_time_until_data_loss_seconds",
          "Soonest data loss of any lagging group on the partition. Absent when nothing is at risk. "
          "Partition-level."),
    _ours("partition_replicas_lost", PARTITION, "partition", "replicas_lost",
          "Replicas lost: replication factor - ISR. Partition-level."),
    _ours("partition_under_min_isr", PARTITION, "partition", "under_min_isr",
          "1 when ISR < min.insync.replicas: producers with acks=all fail. Partition-level."),
    _ours("partition_offline", PARTITION, "partition", "offline",
          "1 when the partition has no leader. Partition-level."),
)  # fmt: skip

TOPICS: tuple[MetricSpec, ...] = (
    _ours("topic_partitions", TOPIC, "topic", "partitions", "Partitions of the topic."),
    _ours("topic_size_bytes", TOPIC, "topic", "size_bytes", "Sum of the leader replicas' sizes."),
    _ours("topic_retention_headroom_bytes", TOPIC, "topic", "min_headroom_bytes",
          "Smallest partition headroom: retention.bytes - leader replica size. Absent when unlimited."),
    _ours("topic_max_size_ratio", TOPIC, "topic", "max_size_ratio",
          "Largest partition size / retention.bytes (1 = the size limit deletes now). Absent when "
          "unlimited."),
    _ours("topic_min_time_coverage_seconds", TOPIC, "topic", "min_time_coverage_seconds",
          "Smallest partition time coverage: now - timestamp of the oldest retained record."),
    _ours("topic_retention_shortfall_seconds", TOPIC, "topic", "retention_shortfall_seconds",
          "Largest partition retention shortfall: retention.ms - time coverage when the size limit "
          "deletes first."),
    _ours("topic_time_until_data_loss_seconds", TOPIC, "topic", "min_time_until_data_loss_seconds",
          "Soonest data loss of any lagging group on the topic. Absent when nothing is at risk."),
    _ours("topic_max_replicas_lost", TOPIC, "topic", "max_replicas_lost",
          "Largest replicas lost (replication factor - ISR) of a partition of the topic."),
    _ours("topic_under_replicated_partitions", TOPIC, "topic", "under_replicated_partitions",
          "Partitions with ISR < replication factor."),
    _ours("topic_under_min_isr_partitions", TOPIC, "topic", "under_min_isr_partitions",
          "Partitions with ISR < min.insync.replicas."),
    _ours("topic_offline_partitions", TOPIC, "topic", "offline_partitions", "Partitions with no leader."),
)  # fmt: skip

BROKERS: tuple[MetricSpec, ...] = (
    _ours("broker_up", BROKER, "broker", "up",
          "1 while the broker is in the cluster metadata; 0 when it was in the cluster and is gone."),
    _ours("broker_leaders", BROKER, "broker", "leaders", "Partitions this broker leads."),
    _ours("broker_fair_share_leaders", BROKER, "broker", "fair_share_leaders",
          "Partitions / live brokers: the leaders each broker would have if balanced."),
    _ours("broker_leader_imbalance", BROKER, "broker", "leader_imbalance",
          "Leaders / fair share (1.0 = balanced)."),
    _ours("broker_non_preferred_leaders", BROKER, "broker", "non_preferred_leaders",
          "Partitions led here whose preferred leader (first replica) is another broker."),
    _ours("broker_disk_total_bytes", BROKER, "broker", "disk_total_bytes",
          "Total bytes of the broker's log dirs (DescribeLogDirs v4+)."),
    _ours("broker_disk_usable_bytes", BROKER, "broker", "disk_usable_bytes",
          "Usable bytes left in the broker's log dirs: the disk headroom."),
    _ours("broker_disk_used_ratio", BROKER, "broker", "disk_used_ratio", "1 - usable / total."),
)  # fmt: skip


PROBE: tuple[MetricSpec, ...] = (
    _ours("broker_probe_produce_latency_seconds", BROKER, "broker", "probe_produce_latency_seconds",
          "End-to-end probe, newest round: seconds until the cluster acknowledged (acks=all) the "
          "message produced to the probe partition the broker leads."),
    _ours("broker_probe_roundtrip_latency_seconds", BROKER, "broker", "probe_end_to_end_latency_seconds",
          "End-to-end probe, newest round: seconds from producing the message until the probe's "
          "consumer received it back."),
    _ours("broker_probe_commit_latency_seconds", BROKER, "broker", "probe_commit_latency_seconds",
          "End-to-end probe, newest round: seconds the offset commit of the probe's group took."),
    _ours("broker_probe_successes", BROKER, "broker", "probe_successes",
          "End-to-end probe messages through the broker that made the round trip in the evaluation window."),
    _ours("broker_probe_failures", BROKER, "broker", "probe_failures",
          "End-to-end probe messages through the broker that failed (not led by it, produce, consume or "
          "commit) in the evaluation window."),
    _ours("broker_probe_failing", BROKER, "broker", "probe_failing",
          "1 when the newest end-to-end probe round failed on the broker."),
)  # fmt: skip

SHARE_GROUPS: tuple[MetricSpec, ...] = (
    _ours("share_group_lag", GROUP, "share_group", "lag",
          "Records of the share group (KIP-932) waiting: from each share partition's start offset to the "
          "log end, not yet finished, summed. Reported by the broker from Kafka 4.2 (KIP-1226); end "
          "offset - start offset, an upper bound, before. Newest share-groups sample."),
    _ours("share_group_max_lag", GROUP, "share_group", "max_lag",
          "Largest share-partition lag of the share group."),
    _ours("share_group_members", GROUP, "share_group", "members", "Members of the share group."),
    _ours("share_group_partitions", GROUP, "share_group", "partitions",
          "Share partitions the share group has state for."),
)  # fmt: skip

CLUSTERS: tuple[MetricSpec, ...] = (
    _ours("cluster_brokers", CLUSTER, "cluster", "brokers", "Brokers known, not unregistered."),
    _ours("cluster_brokers_down", CLUSTER, "cluster", "brokers_down",
          "Brokers that were in the cluster and are gone from the metadata, still registered."),
    _ours("cluster_partitions", CLUSTER, "cluster", "partitions", "Partitions."),
    _ours("cluster_under_replicated_partitions", CLUSTER, "cluster", "under_replicated_partitions",
          "Partitions with ISR < replication factor."),
    _ours("cluster_under_min_isr_partitions", CLUSTER, "cluster", "under_min_isr_partitions",
          "Partitions with ISR < min.insync.replicas."),
    _ours("cluster_offline_partitions", CLUSTER, "cluster", "offline_partitions",
          "Partitions with no leader."),
    _ours("cluster_max_leader_imbalance", CLUSTER, "cluster", "max_leader_imbalance",
          "Largest broker leader imbalance (leaders / fair share)."),
    _ours("cluster_collection_age_seconds", CLUSTER, "cluster", "collection_age_seconds",
          "Seconds since the last successful offsets collection, at the evaluation."),
    _ours("cluster_unreachable", CLUSTER, "cluster", "unreachable",
          "1 when the last collection runs failed to reach the cluster."),
    _ours("cluster_evaluation_timestamp_seconds", CLUSTER, "cluster", "evaluated_at_seconds",
          "Unix time of the cluster's latest evaluation, which every state metric of the cluster comes "
          "from: alert when time() minus it grows."),
)  # fmt: skip

SCRAPE: tuple[MetricSpec, ...] = (
    MetricSpec("kafka_health_up", "gauge", (),
               "1 when the served state is current and complete: the last check and build of the "
               "snapshot succeeded and every state query answered. 0 when not: the last good snapshot "
               "is served (stale), or none yet (process metrics are always served).", "ours"),
    MetricSpec("kafka_health_scrape_error", "gauge", ("query",),
               "Per state query: 1 when it failed or timed out in the last check or build of the "
               "snapshot (all of them while PostgreSQL is away or before the first snapshot), 0 when it "
               "answered.", "ours"),
    MetricSpec("kafka_health_snapshot_failed", "gauge", (),
               "1 when the last check or build of the snapshot failed (PostgreSQL away or too slow, or "
               "a state query failed): the state served is the last good snapshot, or none.", "ours"),
    MetricSpec("kafka_health_snapshot_age_seconds", "gauge", (),
               "Seconds since the served snapshot was last known to be current (built, or checked "
               "against the newest evaluations); grows while checks fail. Absent before the first "
               "snapshot.", "ours"),
    MetricSpec("kafka_health_scrape_duration_seconds", "gauge", (),
               "Seconds the served snapshot's build spent reading the state from PostgreSQL (a scrape "
               "itself does not read it).", "ours"),
    MetricSpec("kafka_health_offset_lag_age_seconds", "gauge", (),
               "Seconds since the offset lag series (kafka_consumer_group_*lag_in_offsets) were last "
               "brought up to the newest commits the store holds: each scrape or push re-reads the "
               "offset lag of the groups with a commit since the last read (at most once a second); "
               "grows while that read fails. Absent before the first read.", "ours"),
    MetricSpec("kafka_health_partition_series", "gauge", (),
               "Partition-level series in the served snapshot (metrics.max_partition_series caps them).",
               "ours"),
    MetricSpec("kafka_health_partition_series_dropped", "gauge", (),
               "Partition-level series the served snapshot left out because of "
               "metrics.max_partition_series.", "ours"),
)  # fmt: skip

PROBE_MESSAGE = ("cluster", "partition_id", "broker")

KMINION: tuple[MetricSpec, ...] = (
    MetricSpec("kminion_end_to_end_produce_latency_seconds", "histogram", PROBE_MESSAGE,
               "Time until the cluster acknowledged (acks=all) a produced probe message.", "kminion"),
    MetricSpec("kminion_end_to_end_roundtrip_latency_seconds", "histogram", PROBE_MESSAGE,
               "Time between producing a probe message and consuming it back.", "kminion"),
    MetricSpec("kminion_end_to_end_offset_commit_latency_seconds", "histogram", CLUSTER,
               "Time the cluster took to answer the probe group's offset commit.", "kminion"),
    MetricSpec("kminion_end_to_end_messages_produced_total", "counter", PROBE_MESSAGE,
               "Probe messages produced, counted when the cluster answered or the round's budget ran out.",
               "kminion"),
    MetricSpec("kminion_end_to_end_messages_produced_failed_total", "counter", PROBE_MESSAGE,
               "Probe messages that failed to produce (an error or no acknowledgement within the budget).",
               "kminion"),
    MetricSpec("kminion_end_to_end_messages_received_total", "counter", PROBE_MESSAGE,
               "Probe messages consumed back within the round's budget.", "kminion"),
    MetricSpec("kminion_end_to_end_messages_lost_total", "counter", PROBE_MESSAGE,
               "Probe messages produced successfully but not consumed back within the round's budget.",
               "kminion"),
    MetricSpec("kminion_end_to_end_offset_commits_total", "counter", CLUSTER,
               "Offset commits of the probe group.", "kminion"),
    MetricSpec("kminion_end_to_end_offset_commits_failed_total", "counter", CLUSTER,
               "Offset commits of the probe group that returned an error or timed out.", "kminion"),
)  # fmt: skip
"""The end-to-end probe's process metrics (`monitor/collect/probe_metrics.py`)."""

PROCESS: tuple[MetricSpec, ...] = (
    MetricSpec("kafka_health_notifications_total", "counter", ("receiver", "outcome"),
               "Notification delivery attempts by receiver and outcome (sent, retry, failed).", "ours"),
    MetricSpec("kafka_health_notification_failures_total", "counter", ("receiver", "reason"),
               "Failed delivery attempts by receiver and reason: http_<status> when the receiver answered, "
               "else the failure type (timeout, connection, misconfigured, template, ...).", "ours"),
    MetricSpec("kafka_health_push_samples_total", "counter", ("target", "outcome"),
               "Samples pushed by target and outcome (sent; dropped: refused by the target or pushed out of "
               "a full queue).", "ours"),
    MetricSpec("kafka_health_push_failures_total", "counter", ("target", "reason"),
               "Failed push attempts by target and reason (http_<status>, timeout, connection, "
               "credentials).", "ours"),
    MetricSpec("kafka_health_push_queue_batches", "gauge", ("target",),
               "Batches a remote-write target has not taken yet (sent first at the next push).", "ours"),
    MetricSpec("kafka_health_collection_runs_total", "counter", ("cluster", "job", "status"),
               "Job runs (collection, evaluation, alerting) this process finished, by cluster, job and "
               "status (ok, partial, failed); the failures are status=\"failed\".", "ours"),
    MetricSpec("kafka_health_collection_run_duration_seconds", "histogram", ("cluster", "job"),
               "Wall time of this process's job runs, by cluster and job.", "ours"),
    MetricSpec("python_gc_objects_collected_total", "counter", ("generation",),
               "Objects collected during gc.", "prometheus_client"),
    MetricSpec("python_gc_objects_uncollectable_total", "counter", ("generation",),
               "Uncollectable objects found during GC.", "prometheus_client"),
    MetricSpec("python_gc_collections_total", "counter", ("generation",),
               "Number of times this generation was collected.", "prometheus_client"),
    MetricSpec("python_info", "gauge", ("implementation", "major", "minor", "patchlevel", "version"),
               "Python platform information.", "prometheus_client"),
    MetricSpec("process_virtual_memory_bytes", "gauge", (), "Virtual memory size in bytes.",
               "prometheus_client"),
    MetricSpec("process_resident_memory_bytes", "gauge", (), "Resident memory size in bytes.",
               "prometheus_client"),
    MetricSpec("process_start_time_seconds", "gauge", (),
               "Start time of the process since unix epoch in seconds.", "prometheus_client"),
    MetricSpec("process_cpu_seconds_total", "counter", (), "Total user and system CPU time in seconds.",
               "prometheus_client"),
    MetricSpec("process_open_fds", "gauge", (), "Number of open file descriptors.", "prometheus_client"),
    MetricSpec("process_max_fds", "gauge", (), "Maximum number of open file descriptors.",
               "prometheus_client"),
)  # fmt: skip

STATE: tuple[MetricSpec, ...] = (
    *COMPATIBLE, *GROUPS, *OBJECTIVES, *SHARE_GROUPS, *PARTITIONS, *TOPICS, *BROKERS, *PROBE, *CLUSTERS,
)  # fmt: skip
"""The metrics read from the views once per evaluation (the snapshot)."""

CATALOGUE: tuple[MetricSpec, ...] = (*STATE, *SCRAPE, *KMINION, *PROCESS)
BY_NAME: dict[str, MetricSpec] = {spec.name: spec for spec in CATALOGUE}


def spec_of_family(family: str) -> MetricSpec | None:
    """The catalogue entry a parsed family belongs to: its own, or for `<x>_created` (the creation
    time prometheus_client serves as a gauge beside every counter and histogram series) the
    counter's or histogram's."""
    specs = {spec.family: spec for spec in CATALOGUE}
    if family in specs:
        return specs[family]
    base = specs.get(family.removesuffix("_created")) if family.endswith("_created") else None
    return base if base is not None and base.type in ("counter", "histogram") else None


VIEWS: dict[str, str] = {
    "group_partition": "group_partition_lag",
    "group_topic": "group_topic_lag",
    "group": "group_lag",
    "partition": "retention_headroom, replication_state",
    "topic": "topic_state",
    "broker": "broker_state",
    "cluster": "cluster_state",
    "share_group": "share_group_state (migration 0018)",
    "objective": "derived_lag_objective of latest_evaluations (migration 0028)",
    "objective_burn": "derived_lag_objective of latest_evaluations (migration 0028)",
}
"""State query -> the views it reads (migration 0005), for people checking a value in SQL."""

NOT_SERVED = (
    "kafka-lag-go's `kafka_iteration_time_seconds` (one unlabelled gauge for all clusters) is not "
    "served: `kafka_health_collection_run_duration_seconds{cluster, job}` measures the same per cluster "
    "and job. kafka_exporter's `kafka_consumergroup_lag{consumergroup, topic, partition}` is not served "
    "either; its value is `kafka_consumer_group_lag_in_offsets`."
)

_TITLES = (
    ("kafka-lag-go compatible", COMPATIBLE),
    ("Consumer groups", GROUPS),
    ("Lag objectives (`evaluate.objectives_file`)", OBJECTIVES),
    ("Share groups (KIP-932, Kafka 4.1+)", SHARE_GROUPS),
    ("Partitions (partition-level: `metrics.partition_series`, `metrics.max_partition_series`)", PARTITIONS),
    ("Topics", TOPICS),
    ("Brokers", BROKERS),
    ("End-to-end probe (`collect.probe.enabled`)", PROBE),
    ("End-to-end probe, KMinion's names (process metrics of the daemon running the probe)", KMINION),
    ("Clusters", CLUSTERS),
    ("The snapshot", SCRAPE),
    ("Process", PROCESS),
)


def render_markdown() -> str:
    """`docs/metrics.md`: the catalogue as tables, one per group of metrics."""
    lines = [
        "# Metrics served on `/metrics`",
        "",
        "Generated from `monitor/expose/metrics/catalogue.py` (`python -m monitor.expose.metrics.catalogue",
        "> docs/metrics.md`); a test keeps the two equal and checks a real scrape against the catalogue.",
        "",
        "State metrics are read from the SQL views (the latest evaluation of each cluster) once per",
        "evaluation: a check every `metrics.snapshot_check_seconds` notices a new evaluation and rebuilds",
        "the snapshot, kept as encoded bytes (text format, and gzip for scrapers that send",
        "`Accept-Encoding: gzip`). A scrape serves those bytes, the snapshot's own gauges and this",
        "process's metrics, and never queries PostgreSQL per series. Each build is complete, so a",
        "deleted group or topic leaves no stale series.",
        "",
        "The offset lag series (`kafka_consumer_group_lag_in_offsets` and the group and group-topic",
        "sums and maxima in offsets) follow the commits between evaluations: a scrape (or a push)",
        "first asks which groups had a commit since the last such read and puts those groups' offset",
        "lag, read from the newest committed and end offsets the store holds, in the snapshot (one read",
        "serves the scrapes of the next second, a scrape waits for it at most a second, and nothing is",
        "read while nothing scrapes); the other series, and the offset lag of groups without a new",
        "commit, stay the evaluation's. Until a cluster's first evaluation (the daemon's first",
        "minutes, a cluster just added), its offset lag series are read from the newest offsets",
        "stored, rebuilt after each of its offsets runs, and its other group series are absent.",
        "`kafka_health_offset_lag_age_seconds` says how long ago that last happened.",
        "",
        "When PostgreSQL is away or too slow, the answer is still 200 with the last good snapshot,",
        "marked stale: `kafka_health_up` 0, `kafka_health_snapshot_failed` 1 and",
        "`kafka_health_snapshot_age_seconds` growing (alert on `kafka_health_up == 0` or on the age).",
        "Before the first snapshot only the process metrics are served.",
        "",
        "Partition-level series can be turned off for every cluster (`metrics.partition_series: false`)",
        "or per cluster (`clusters[].partition_series: false`; its group, topic and cluster series stay),",
        "and are capped (`metrics.max_partition_series`): the most lagging group-partitions come first,",
        "then the least healthy partitions; what the cap leaves out is counted in",
        "`kafka_health_partition_series_dropped` and logged once as a warning.",
        "",
        "Every counter and histogram series also has its creation time, as a gauge named like it with",
        "`_total` dropped and `_created` added (prometheus_client's convention).",
        "",
        NOT_SERVED,
    ]
    for title, specs in _TITLES:
        lines += ["", f"## {title}", "", "| name | type | labels | origin | source | meaning |"]
        lines.append("|---|---|---|---|---|---|")
        for spec in specs:
            source = _source(spec)
            labels = ", ".join(spec.labels) or "-"
            meaning = spec.meaning.replace("|", "\\|")
            lines.append(f"| `{spec.name}` | {spec.type} | {labels} | {spec.origin} | {source} | {meaning} |")
    return "\n".join(lines) + "\n"


_COMPUTED = {
    "sum_lag_seconds": "group_partition_lag: sum of `lag_seconds`",
    "groups": "group_lag: rows of the cluster",
    "min_headroom_bytes": "retention_headroom: min of `headroom_bytes`",
    "evaluated_at_seconds": "cluster_state: `evaluated_at` as Unix time",
    "one": "1 per row",
    "compliance_ratio": "derived_lag_objective: `compliance` / 100",
    "target_ratio": "derived_lag_objective: `target` / 100",
    "burn_rate": "derived_lag_objective: `burn_rate_<window>`, one row per window",
}
"""Columns the state queries compute rather than read from a view, as the docs describe them."""


def _source(spec: MetricSpec) -> str:
    if spec.query is None or spec.column is None:
        return "this process"
    if spec.column == "one":
        return f"{VIEWS[spec.query]}: {_COMPUTED['one']}"
    return _COMPUTED.get(spec.column) or f"{VIEWS[spec.query]}: `{spec.column}`"


if __name__ == "__main__":
    sys.stdout.write(render_markdown())

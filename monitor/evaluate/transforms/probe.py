"""The end-to-end probe's verdict per broker, from `probe_samples` (monitor/collect/jobs/probe.py):
each broker is probed through the probe partition it is the preferred leader of."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

_BROKER = ("cluster", "broker_id")


def broker_probe(probe_samples: DataFrame) -> DataFrame:
    """Per (cluster, broker_id) with probe samples in the window: `probe_successes` and
    `probe_failures` (probe messages over the window), `probe_failing` (a message of the newest
    round failed) and the newest round's latencies (the largest over the broker's partitions;
    null when that round failed before the step)."""
    counts = probe_samples.groupBy(*_BROKER).agg(
        F.count_if(F.col("ok")).cast("int").alias("probe_successes"),
        F.count_if(~F.col("ok")).cast("int").alias("probe_failures"),
        F.max("sampled_at").alias("_last_round"),
    )
    last = (
        probe_samples.join(counts.select(*_BROKER, "_last_round"), list(_BROKER))
        .where(F.col("sampled_at") == F.col("_last_round"))
        .groupBy(*_BROKER)
        .agg(
            F.max(~F.col("ok")).alias("probe_failing"),
            F.max("produce_seconds").alias("probe_produce_latency_seconds"),
            F.max("end_to_end_seconds").alias("probe_end_to_end_latency_seconds"),
            F.max("commit_seconds").alias("probe_commit_latency_seconds"),
        )
    )
    return counts.drop("_last_round").join(last, list(_BROKER), "left")

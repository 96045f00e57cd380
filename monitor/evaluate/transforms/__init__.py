"""Pure transforms of the evaluate stage: the store's tables in (as DataFrames), the derived
entities of monitor.derived out. No I/O, no session, no clock: "now" is
`Inputs.evaluated_at`, so a window evaluated twice gives the same result.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from monitor.derived import ENTITIES
from monitor.evaluate.transforms.common import PARTITION_KEYS, conform, topic_settings
from monitor.evaluate.transforms.inputs import SCHEMAS, Inputs, empty_inputs
from monitor.evaluate.transforms.lag import group_partition_frame
from monitor.evaluate.transforms.replication import broker_frame, partition_replication
from monitor.evaluate.transforms.retention import partition_storage
from monitor.evaluate.transforms.rollups import clusters, group_topics, groups, topics
from monitor.evaluate.transforms.status import DEFAULT_WINDOW_COMMITS

__all__ = ["DEFAULT_WINDOW_COMMITS", "SCHEMAS", "Inputs", "derive", "empty_inputs"]


def derive(inputs: Inputs, window_commits: int = DEFAULT_WINDOW_COMMITS) -> dict[str, DataFrame]:
    """The seven entity DataFrames, keyed by entity name (the keys of columns.ENTITIES), each
    with exactly `evaluated_at`, `cluster` and that entity's columns, in order, with their types.

    `window_commits` is the number of commits the sliding-window status looks at. The frames
    share lineage (group-partitions feed three roll-ups): a caller writing all of them should
    cache what it reuses. Raises ValueError when `window_commits` < 1.
    """
    if window_commits < 1:
        raise ValueError(f"window_commits must be at least 1, not {window_commits}")
    at = inputs.evaluated_at
    # 1. Topic settings from the open config rows.
    settings = topic_settings(inputs.topic_configs)
    # 2. Partitions: replication from metadata, storage from offsets and log dirs.
    replication = partition_replication(inputs.partitions, inputs.brokers, settings)
    storage = partition_storage(inputs, replication.select(*PARTITION_KEYS, "leader"), settings)
    partition = (
        _partition_keys(inputs)
        .join(storage, list(PARTITION_KEYS), "left")
        .join(replication, list(PARTITION_KEYS), "left")
    )
    # 3. Group-partitions, then their roll-ups.
    group_partition = group_partition_frame(inputs, partition, window_commits)
    # 4. Brokers, then the cluster.
    broker = broker_frame(inputs.brokers, replication, inputs.broker_disks)
    frames = {
        "group_partition": group_partition,
        "group_topic": group_topics(group_partition),
        "group": groups(group_partition),
        "partition": partition,
        "topic": topics(partition, group_partition),
        "broker": broker,
        "cluster": clusters(partition, broker, inputs.collection_runs, at),
    }
    return {entity: conform(frames[entity], entity, at) for entity in ENTITIES}


def _partition_keys(inputs: Inputs) -> DataFrame:
    """Every partition known from metadata or from offsets."""
    keys = [F.col(k) for k in PARTITION_KEYS]
    return (
        inputs.partitions.select(*keys).unionByName(inputs.latest_partition_offsets.select(*keys)).distinct()
    )

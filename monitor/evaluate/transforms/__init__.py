"""Pure transforms of the evaluate stage: the store's tables in (as DataFrames), the derived
entities of monitor.core.derived out. No I/O, no session, no clock: "now" is
`Inputs.evaluated_at`, so a window evaluated twice gives the same result.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from monitor.core.derived import ENTITIES
from monitor.evaluate.transforms.advice import ADVICE_COLUMNS
from monitor.evaluate.transforms.common import PARTITION_KEYS, conform, topic_settings
from monitor.evaluate.transforms.inputs import SCHEMAS, Inputs, empty_inputs
from monitor.evaluate.transforms.lag import group_partition_frame
from monitor.evaluate.transforms.objectives import ObjectiveInputs, lag_objectives, no_objectives
from monitor.evaluate.transforms.probe import broker_probe
from monitor.evaluate.transforms.replication import broker_frame, partition_replication
from monitor.evaluate.transforms.retention import partition_storage
from monitor.evaluate.transforms.rollups import clusters, group_topics, groups, topics
from monitor.evaluate.transforms.share import (
    SHARE_ROLLUP_PARTS,
    share_group_topics,
    share_groups,
    share_partitions,
    share_states,
)
from monitor.evaluate.transforms.status import DEFAULT_WINDOW_COMMITS

__all__ = ["DEFAULT_WINDOW_COMMITS", "SCHEMAS", "Inputs", "ObjectiveInputs", "derive", "empty_inputs"]


def _as_is(frame: DataFrame) -> DataFrame:
    return frame


def derive(
    inputs: Inputs,
    window_commits: int = DEFAULT_WINDOW_COMMITS,
    keep: Callable[[DataFrame], DataFrame] = _as_is,
    objectives: ObjectiveInputs | None = None,
    *,
    read_once: bool = False,
) -> dict[str, DataFrame]:
    """The ten entity DataFrames, keyed by entity name (the keys of columns.ENTITIES), each
    with exactly `evaluated_at`, `cluster` and that entity's columns, in order, with their types.

    `window_commits` is the number of commits the sliding-window status looks at. Raises
    ValueError when `window_commits` < 1.

    `keep` is applied to every frame that is costly and used more than once (it returns the frame
    to use): the partitions' replication (feeding the partitions and the brokers), the partitions,
    the group-partitions and the group-topics (feeding the groups, whose consumer advice they
    carry, and the topics), and the roll-ups
    themselves (a caller counts, evaluates and writes each entity). Every entity is a projection
    of a kept frame (`conform`), which adds "now" after it: with `Inputs.clock`, a frame whose own
    computation needs no "now" is cached without the clock's subquery, which Spark runs as a job
    of its own for each cached frame that holds it. A caller using the entities more than once
    passes a `keep` that caches.

    `objectives` are the lag objectives and their counted history (transforms.objectives); none
    by default.

    `read_once`: the caller reads each entity once (a plan for one action, plan.gather). The
    entities no frame here reads (topic, share group, cluster) are then not given to `keep`:
    caching a frame read once costs Spark's planning of it at each run, its lookup in every plan
    after it and its columnar buffers, and saves nothing (docs/bench/evaluation-profile.md).
    """
    if window_commits < 1:
        raise ValueError(f"window_commits must be at least 1, not {window_commits}")
    at = inputs.now
    keep_end = _as_is if read_once else keep  # for the frames at the ends of the chains
    # 1. Topic settings from the open config rows.
    settings = topic_settings(inputs.topic_configs)
    # 2. Partitions: replication from metadata, storage from offsets and log dirs.
    replication = keep(partition_replication(inputs.partitions, inputs.brokers, settings))
    storage = partition_storage(inputs, replication.select(*PARTITION_KEYS, "leader"), settings)
    partition = keep(
        _partition_keys(inputs)
        .join(storage, list(PARTITION_KEYS), "left")
        .join(replication, list(PARTITION_KEYS), "left")
    )
    # 3. Group-partitions (with the lag at the window's start, for group.lag_growing), then their
    #    roll-ups.
    group_partition = conform(
        keep(group_partition_frame(inputs, partition, window_commits)), "group_partition", at, _GP_EXTRA
    )
    # 4. Brokers (with the end-to-end probe's verdict), then the cluster.
    brokers = broker_frame(inputs.brokers, replication, inputs.broker_disks).join(
        broker_probe(inputs.probe_samples), ["cluster", "broker_id"], "left"
    )
    broker = conform(keep(brokers), "broker", at)
    # The group-topics carry their group's consumer advice: the groups roll up from them first.
    topic_rollup = keep(group_topics(group_partition))
    group = keep(groups(topic_rollup))
    advice = group.select("cluster", "group_id", *ADVICE_COLUMNS)
    group_topic = conform(keep(topic_rollup.join(advice, ["cluster", "group_id"], "left")), "group_topic", at)
    # 5. Share groups: their share partitions rolled up per topic, then per group.
    share_group_states = keep(share_states(inputs))
    share_topics = keep(share_group_topics(share_partitions(inputs), share_group_states))
    share_topic = conform(share_topics, "share_group_topic", at, SHARE_ROLLUP_PARTS)
    frames = {
        "group_partition": group_partition.drop(*_GP_EXTRA),
        "group_topic": group_topic,
        "group": conform(group, "group", at),
        "partition": conform(partition, "partition", at),
        "topic": conform(keep_end(topics(partition, group_topic)), "topic", at),
        "share_group_topic": share_topic.drop(*SHARE_ROLLUP_PARTS),
        "share_group": conform(keep_end(share_groups(share_topic, share_group_states)), "share_group", at),
        "broker": broker,
        "cluster": conform(keep_end(clusters(partition, broker, inputs.collection_runs, at)), "cluster", at),
        "lag_objective": conform(
            lag_objectives(group, *_objectives(inputs, objectives)), "lag_objective", at
        ),
    }
    return {entity: frames[entity] for entity in ENTITIES}


_GP_EXTRA = ("window_start_lag",)


def _objectives(inputs: Inputs, objectives: ObjectiveInputs | None) -> tuple[DataFrame, DataFrame, DataFrame]:
    chosen = objectives if objectives is not None else no_objectives(inputs.group_offsets.sparkSession)
    return chosen.objectives, chosen.groups, chosen.history


def _partition_keys(inputs: Inputs) -> DataFrame:
    """Every partition known from metadata or from offsets."""
    keys = [F.col(k) for k in PARTITION_KEYS]
    return (
        inputs.partitions.select(*keys).unionByName(inputs.latest_partition_offsets.select(*keys)).distinct()
    )

"""The rule engine on real Spark: the default pack over small entity frames gives exactly the
expected findings, numbered row by row; and the texts rendered from one finding."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from monitor.core.derived import columns_of
from monitor.evaluate.engine import FINDINGS_DDL, evaluate_rules, render, severity_case
from monitor.evaluate.plan import MATCHES, PART, gather
from monitor.evaluate.rules import Rule, load_rules
from monitor.evaluate.transforms.common import union_by_name

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
T = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)

# Healthy values per entity; each row below overrides what makes it (un)healthy.
HEALTHY: dict[str, dict[str, Any]] = {
    "cluster": {"brokers": 3, "brokers_down": 0, "partitions": 6, "offline_partitions": 0,
                "under_replicated_partitions": 0, "under_min_isr_partitions": 0,
                "max_leader_imbalance": 1.0, "collection_age_seconds": 30.0, "unreachable": False},
    "broker": {"rack": "a", "up": True, "down": False, "leaders": 10, "fair_share_leaders": 10.0,
               "leader_imbalance": 1.0, "non_preferred_leaders": 0, "replicas": 30,
               "disk_total_bytes": 1000, "disk_usable_bytes": 500, "disk_used_ratio": 0.5},
    "partition": {"topic": "orders", "start_offset": 0, "end_offset": 100, "produce_rate": 1.0,
                  "produce_bytes_rate": 100.0, "size_bytes": 500, "retention_bytes": 1000,
                  "retention_ms": 604800000, "size_ratio": 0.5, "time_coverage_seconds": 600000.0,
                  "retention_shortfall_seconds": 0.0, "leader": 1, "replication_factor": 3, "isr": 3,
                  "min_insync_replicas": 2, "replicas_lost": 0, "under_replicated": False,
                  "under_min_isr": False, "offline": False, "non_preferred_leader": False,
                  "replicas_sharing_rack": 0},
    "topic": {"partitions": 6, "produce_rate": 6.0, "produce_bytes_rate": 600.0, "size_bytes": 3000,
              "max_size_ratio": 0.5, "min_time_coverage_seconds": 600000.0, "retention_ms": 604800000,
              "retention_bytes": 1000, "retention_shortfall_seconds": 0.0, "max_replicas_lost": 0,
              "under_replicated_partitions": 0, "under_min_isr_partitions": 0, "offline_partitions": 0,
              "min_time_until_data_loss_seconds": None},
    "group_partition": {"topic": "orders", "committed_offset": 100, "end_offset": 100, "offset_lag": 0,
                        "lag_seconds": 0.0, "append_lag_seconds": 0.0, "commit_lag_seconds": 1.0,
                        "time_since_last_commit_seconds": 5.0, "consume_rate": 1.0, "produce_rate": 1.0,
                        "time_to_catch_up_seconds": None, "time_until_data_loss_seconds": None,
                        "data_loss_occurred": False, "lag_seconds_method": "exact",
                        "lag_seconds_error": None, "data_loss_limit": None, "status": "OK",
                        "group_state": "Stable", "members": 2, "sampled": True},
    "group_topic": {"topic": "orders", "partitions": 6, "offset_lag": 0, "lag_seconds": 0.0,
                    "append_lag_seconds": 0.0, "commit_lag_seconds": 1.0,
                    "time_since_last_commit_seconds": 5.0, "consume_rate": 6.0, "produce_rate": 6.0,
                    "time_to_catch_up_seconds": None, "time_until_data_loss_seconds": None,
                    "data_loss_occurred": False, "max_offset_lag": 0, "max_lag_seconds": 0.0,
                    "status": "OK", "group_state": "Stable", "members": 2, "sampled": True},
    "group": {"topics": 1, "partitions": 6, "offset_lag": 0, "lag_seconds": 0.0, "append_lag_seconds": 0.0,
              "commit_lag_seconds": 1.0, "time_since_last_commit_seconds": 5.0, "consume_rate": 6.0,
              "produce_rate": 6.0, "time_to_catch_up_seconds": None, "time_until_data_loss_seconds": None,
              "data_loss_occurred": False, "max_offset_lag": 0, "max_lag_seconds": 0.0, "status": "OK",
              "group_state": "Stable", "members": 2, "lag_growing": False, "sampled": True},
}  # fmt: skip

# (entity, row overrides); the comment says which finding the row must give.
ROWS: list[tuple[str, dict[str, Any]]] = [
    ("cluster", {}),  # 1 healthy
    ("cluster", {"cluster": "dr", "unreachable": True, "collection_age_seconds": 600.0}),  # 2 unreachable
    ("broker", {"broker_id": 1}),  # 3 healthy
    ("broker", {"broker_id": 2, "up": False, "down": True, "leaders": 0}),  # 4 down
    ("broker", {"broker_id": 3, "disk_used_ratio": 0.9}),  # 5 disk warning
    ("broker", {"broker_id": 4, "disk_used_ratio": 0.97, "leader_imbalance": 1.3}),  # 6 disk critical, imbalance info
    ("partition", {"partition": 0}),  # 7 healthy
    ("partition", {"partition": 1, "isr": 2, "replicas_lost": 1, "under_replicated": True}),  # 8 one lost
    ("partition", {"partition": 2, "isr": 1, "min_insync_replicas": 1, "replicas_lost": 2,
                   "under_replicated": True}),  # 9 two lost
    ("partition", {"partition": 3, "isr": 1, "replicas_lost": 2, "under_replicated": True,
                   "under_min_isr": True}),  # 10 under min ISR
    ("partition", {"partition": 4, "leader": None, "isr": 0, "replicas_lost": 3, "under_replicated": True,
                   "under_min_isr": True, "offline": True}),  # 11 offline
    ("partition", {"partition": 5, "size_ratio": 0.95, "replicas_sharing_rack": 1}),  # 12 near size, rack
    ("topic", {"topic": "orders"}),  # 13 healthy
    ("topic", {"topic": "clicks", "retention_ms": 7200000, "retention_shortfall_seconds": 6600.0,
               "min_time_coverage_seconds": 600.0}),  # 14 shortfall
    ("group_partition", {"group_id": "billing", "partition": 0}),  # 15 healthy
    ("group_partition", {"group_id": "billing", "partition": 3, "offset_lag": 500, "lag_seconds": 2520.0,
                         "time_until_data_loss_seconds": 10800.0, "data_loss_limit": "time",
                         "time_to_read_seconds": 500.0, "data_loss_margin_seconds": 10300.0}),  # 16 3 h
    ("group_partition", {"group_id": "billing", "partition": 4, "offset_lag": 800, "lag_seconds": 2520.0,
                         "consume_rate": 0.0, "time_until_data_loss_seconds": 600.0, "data_loss_limit": "size",
                         "data_loss_margin_seconds": 600.0}),  # 17 10 min, stopped
    ("group_partition", {"group_id": "audit", "partition": 1, "offset_lag": 7,
                         "data_loss_occurred": True}),  # 18 data lost
    ("group_topic", {"group_id": "search"}),  # 19 healthy
    ("group_topic", {"group_id": "billing", "offset_lag": 1000, "append_lag_seconds": 400.0,
                     "max_lag_seconds": 300.0}),  # 20 append lag warning
    ("group", {"group_id": "search"}),  # 21 healthy
    ("group", {"group_id": "billing", "status": "STALL", "offset_lag": 1000, "lag_growing": True,
               "max_lag_seconds": 300.0}),  # 22 stalled
    ("group", {"group_id": "idle", "members": 0, "group_state": "Empty", "offset_lag": 50,
               "lag_growing": True, "max_lag_seconds": 3600.0}),  # 23 nobody consuming
    ("group_partition", {"group_id": "billing", "partition": 5, "offset_lag": 5, "lag_seconds": 3.0,
                         "time_until_data_loss_seconds": 50.0, "data_loss_limit": "size",
                         "time_to_read_seconds": 5.0}),  # 24 keeps up on a topic that keeps a minute
]  # fmt: skip

EXPECTED = {
    ("ClusterUnreachable", "dr", "critical", 600.0),  # 2
    ("BrokerDown", "prod/2", "critical", 30.0),  # 4
    ("BrokerDiskHeadroom", "prod/3", "warning", 0.9),  # 5
    ("BrokerDiskHeadroom", "prod/4", "critical", 0.97),  # 6
    ("LeaderImbalance", "prod/4", "info", 1.3),  # 6
    ("PartitionReplicaLost", "prod/orders/1", "warning", 1.0),  # 8
    ("PartitionReplicasLost", "prod/orders/2", "critical", 2.0),  # 9
    ("PartitionUnderMinIsr", "prod/orders/3", "critical", 1.0),  # 10
    ("PartitionOffline", "prod/orders/4", "critical", 3.0),  # 11
    ("PartitionNearRetentionBytes", "prod/orders/5", "warning", 0.95),  # 12
    ("ReplicasSharingRack", "prod/orders/5", "warning", 1.0),  # 12
    ("RetentionShortfall", "prod/clicks", "warning", 6600.0),  # 14
    ("TimeUntilDataLoss", "prod/billing/orders/3", "warning", 10300.0),  # 16
    ("TimeUntilDataLoss", "prod/billing/orders/4", "critical", 600.0),  # 17
    ("DataLossOccurred", "prod/audit/orders/1", "critical", 7.0),  # 18
    ("ConsumerAppendLag", "prod/billing/orders", "warning", 400.0),  # 20
    ("ConsumerGroupStatus", "prod/billing", "warning", 1000.0),  # 22
    ("ConsumerGroupNoMembers", "prod/idle", "critical", 50.0),  # 23
}


def _frame(spark: SparkSession, entity: str, rows: list[dict[str, Any]]) -> DataFrame:
    columns = list(columns_of(entity).values())
    schema = ", ".join(f"`{c.name}` {c.type}" for c in columns)
    defaults = {"evaluated_at": T, "cluster": "prod", **HEALTHY[entity]}
    data = [tuple({**defaults, **row}.get(c.name) for c in columns) for row in rows]
    return spark.createDataFrame(data, schema)


def _frames(spark: SparkSession, rows: list[tuple[str, dict[str, Any]]]) -> dict[str, DataFrame]:
    entities = dict.fromkeys(entity for entity, _ in rows)
    return {e: _frame(spark, e, [row for entity, row in rows if entity == e]) for e in entities}


@pytest.fixture(scope="module")
def pack() -> list[Rule]:
    ruleset = load_rules([ROOT / "alert_rules"])
    assert ruleset.ok, ruleset.errors
    return list(ruleset.rules)


@pytest.fixture(scope="module")
def findings(spark: SparkSession, pack: list[Rule]) -> list[dict[str, Any]]:
    result = evaluate_rules(_frames(spark, ROWS), pack, T)
    assert result.schema.simpleString() == spark.createDataFrame([], FINDINGS_DDL).schema.simpleString()
    return [row.asDict(recursive=True) for row in result.collect()]


def test_default_pack_gives_exactly_the_expected_findings(findings: list[dict[str, Any]]) -> None:
    got = {(f["rule"], f["entity_key"], f["severity"], f["value"]) for f in findings}
    assert len(got) == len(findings), "one row per (rule, entity)"
    assert got - EXPECTED == set(), "unexpected findings"
    assert EXPECTED - got == set(), "missing findings"


def test_findings_carry_keys_labels_and_for(findings: list[dict[str, Any]], pack: list[Rule]) -> None:
    by_rule = {rule.name: rule for rule in pack}
    for finding in findings:
        assert finding["evaluated_at"].replace(tzinfo=None) == T.astimezone().replace(tzinfo=None)
        assert finding["for_seconds"] == by_rule[finding["rule"]].for_seconds
        assert finding["entity"] == by_rule[finding["rule"]].entity
    lost = next(f for f in findings if f["rule"] == "PartitionReplicaLost")
    assert lost["cluster"] == "prod"
    assert lost["labels"] == {
        "cluster": "prod", "topic": "orders", "partition": "1", "team": "kafka-platform", "page": "false"
    }  # fmt: skip
    paged = next(f for f in findings if f["rule"] == "PartitionReplicasLost")
    assert paged["labels"]["page"] == "true"
    assert json.loads(lost["context"])["min_insync_replicas"] == 2


def test_render_reads_like_a_page(findings: list[dict[str, Any]], pack: list[Rule]) -> None:
    rule = next(r for r in pack if r.name == "TimeUntilDataLoss")
    finding = next(
        f for f in findings if f["entity_key"] == "prod/billing/orders/4" and f["rule"] == rule.name
    )
    summary, description = render(finding, rule)
    assert summary == (
        "Group billing is 42 min behind on orders (partition 4) and will lose unread messages to retention "
        "in about 10 min; not catching up: reads 0.0/s, 1.0/s arrive"
    )
    assert description.startswith(
        "On cluster prod, retention (size limit) deletes the oldest message of orders partition 4 that "
        "consumer group billing has not read in about 10 min"
    )
    assert "It made no progress over the window: 800 messages are unread" in description


def test_most_severe_tier_wins_and_no_tier_means_no_finding(spark: SparkSession) -> None:
    rule = Rule.model_validate(
        {
            "name": "Tiers",
            "description": "tiers in any order",
            "entity": "group_partition",
            "condition": "offset_lag > 0 AND partition < 9",  # `partition` is an SQL keyword too
            "value": "offset_lag",
            "severities": [
                {"severity": "info", "when": "offset_lag >= 1"},
                {"severity": "critical", "when": "offset_lag >= 100"},
                {"severity": "warning", "when": "offset_lag >= 10"},
            ],
            "summary": "{{ group_id }}",
        }
    )
    assert severity_case(rule).startswith("CASE WHEN (offset_lag >= 100) THEN 'critical'")
    rows = [
        {"group_id": "a/b", "partition": 0, "offset_lag": 500},  # 1 all tiers hold: critical
        {"group_id": "c", "partition": 0, "offset_lag": 20},  # 2 warning
        {"group_id": "d", "partition": 0, "offset_lag": 0},  # 3 condition false
        {"group_id": "e", "partition": 0, "offset_lag": None},  # 4 condition null: no match
        {"group_id": "f", "partition": 9, "offset_lag": 500},  # 5 condition false
    ]
    frame = _frame(spark, "group_partition", rows)
    result = evaluate_rules({"group_partition": frame}, [rule], T).collect()
    got = {(r["entity_key"], r["severity"]) for r in result}
    assert got == {("prod/a%2Fb/orders/0", "critical"), ("prod/c/orders/0", "warning")}


def test_rules_without_a_frame_are_skipped_and_nothing_gives_an_empty_frame(
    spark: SparkSession, pack: list[Rule]
) -> None:
    frames = {"cluster": _frame(spark, "cluster", [{}])}
    result = evaluate_rules(frames, pack, T)
    assert result.count() == 0
    assert [f.name for f in result.schema.fields] == [
        "evaluated_at", "rule", "entity", "cluster", "entity_key", "labels", "severity", "value",
        "for_seconds", "context",
    ]  # fmt: skip


def test_the_rows_and_verdicts_gathered_come_in_one_partition(
    spark: SparkSession, pack: list[Rule], findings: list[dict[str, Any]]
) -> None:
    # A plan for one action brings every entity's rows with the verdicts on them (plan.gather) to
    # the driver. Each task of a stage deserialises the stage's whole plan, every entity's branch
    # and every rule in it: one task, whatever the entities' partitions, deserialises it once.
    frames = {entity: frame.repartition(2) for entity, frame in _frames(spark, ROWS).items()}
    gathered = gather(frames, pack)
    assert gathered.rdd.getNumPartitions() == 1
    rows = gathered.collect()
    assert sorted(row[PART] for row in rows) == sorted(entity for entity, _ in ROWS)
    got = {(m["rule"], m["entity_key"], m["severity"]) for row in rows for m in row[MATCHES] or ()}
    assert got == {(f["rule"], f["entity_key"], f["severity"]) for f in findings}


def test_frames_unioned_in_pairs_are_the_chain_of_unions(spark: SparkSession) -> None:
    # The findings of each entity and the gathered rows are unioned as a balanced tree of pairs
    # (Spark analyses each union, the whole plan under it, as it is made): the same columns, in the
    # order the chain gives them, the same types and the same rows in the same order.
    frames = [
        spark.createDataFrame([(i, f"r{i}")], "a INT, b STRING")
        if i % 3
        else spark.createDataFrame([(f"s{i}", float(i), i)], "b STRING, c DOUBLE, a INT")
        for i in range(7)
    ]
    for count in range(1, 8):
        paired = union_by_name(frames[:count], allow_missing_columns=True)
        linear = frames[0]
        for frame in frames[1:count]:
            linear = linear.unionByName(frame, allowMissingColumns=True)
        assert paired.schema == linear.schema, count
        assert paired.collect() == linear.collect(), count
    assert union_by_name(frames, allow_missing_columns=True).columns == ["b", "c", "a"], (
        "the first frame's order"
    )
    with pytest.raises(ValueError, match="at least one"):
        union_by_name([])


def test_the_session_sends_no_python_call_sites_with_its_calls(spark: SparkSession) -> None:
    # PySpark's DataFrame debugging (on by default) walks the Python stack and sends it to the
    # JVM around every DataFrame and Column call: a third of the round trips of building a plan.
    from pyspark.errors.utils import is_debugging_enabled

    spark.range(1).select("id").columns  # noqa: B018  # a call that would send its call site
    assert spark.conf.get("spark.python.sql.dataFrameDebugging.enabled") == "false"
    assert is_debugging_enabled() is False

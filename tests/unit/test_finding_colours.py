"""The dashboard colours rows by the open findings on them: no threshold is copied into the page,
so a rule edited, added or removed moves the page with the pager."""

from __future__ import annotations

from monitor.expose.read.dashboard import OpenFinding
from monitor.expose.web.health import (
    BAD,
    DISK_COLUMNS,
    LEADER_COLUMNS,
    NO_FLAGS,
    OK,
    WARN,
    Flags,
    LossScale,
    broker,
    broker_cell,
    group,
    partition,
    rule_reads,
    topic,
)
from tests.fixtures.rules import default_ruleset

READS = rule_reads(default_ruleset().rules)


def finding(rule: str, entity: str, severity: str, **labels: str) -> OpenFinding:
    return OpenFinding(rule=rule, entity=entity, labels={"cluster": "prod", **labels}, severity=severity)


FLAGS = Flags(
    [
        finding("ConsumerLagSeconds", "group_topic", "warning", group_id="billing", topic="orders"),
        finding("TimeUntilDataLoss", "group_partition", "critical", group_id="billing", topic="orders",
                partition="2"),
        finding("ConsumerCommitLag", "group_topic", "info", group_id="audit", topic="orders"),
        finding("PartitionReplicaLost", "partition", "warning", topic="orders", partition="0"),
        finding("BrokerDiskHeadroom", "broker", "critical", broker_id="2"),
        finding("LeaderImbalance", "broker", "warning", broker_id="3"),
    ],
    READS,
)  # fmt: skip


def test_the_rules_say_which_columns_they_read() -> None:
    assert READS["BrokerDiskHeadroom"] & DISK_COLUMNS and not READS["BrokerDiskHeadroom"] & LEADER_COLUMNS
    assert "leader_imbalance" in READS["LeaderImbalance"]
    assert "max_lag_seconds" in READS["ConsumerLagSeconds"]


def test_a_row_takes_the_worst_finding_on_it_or_inside_it() -> None:
    assert FLAGS.health(group_id="billing") == BAD, "its partition orders-2 pages"
    assert FLAGS.health(group_id="billing", topic="orders") == BAD
    assert FLAGS.health(group_id="billing", topic="orders", partition=0) == OK, "the warning is the topic's"
    assert FLAGS.health(group_id="billing", topic="orders", partition=2) == BAD
    assert FLAGS.health(group_id="billing", topic="payments") == OK
    assert FLAGS.health(group_id="audit") == OK, "info stays in the UI: no colour"
    assert FLAGS.health(topic="orders") == WARN, "a partition's finding, not the groups' lag"
    assert FLAGS.health(topic="orders", partition=0) == WARN
    assert FLAGS.health(topic="orders", partition=1) == OK
    assert FLAGS.health(broker_id=1) == OK and FLAGS.health(broker_id=2) == BAD


def test_a_broker_cell_takes_only_the_rules_about_it() -> None:
    assert broker_cell(True, 2, DISK_COLUMNS, FLAGS) == BAD
    assert broker_cell(True, 2, LEADER_COLUMNS, FLAGS) == OK, "a full disk says nothing of leaders"
    assert broker_cell(True, 3, LEADER_COLUMNS, FLAGS) == WARN
    assert broker_cell(False, 1, DISK_COLUMNS, FLAGS) == BAD, "a broker down is red by itself"
    assert broker({"up": True, "broker_id": 3}, FLAGS) == WARN


def test_numbers_without_a_finding_colour_nothing() -> None:
    # An hour behind, a full disk, a partition near its size limit: green until a rule says so.
    loss = LossScale(1800.0, 21600.0)
    behind = {"group_id": "search", "status": "OK", "max_lag_seconds": 7200.0, "append_lag_seconds": 900.0,
              "data_loss_margin_seconds": None, "data_loss_occurred": False}  # fmt: skip
    assert group(behind, loss, FLAGS.health(group_id="search")) == OK
    assert group({**behind, "status": "ERR"}, loss) == BAD, "a status is a fact, not a threshold"
    assert broker_cell(True, 1, DISK_COLUMNS, NO_FLAGS) == OK
    row = {"partition": 0, "offline": False, "leader": 1, "under_min_isr": False,
           "under_replicated": False, "retention_shortfall_seconds": 0, "size_ratio": 0.99, "replicas_lost": 0,
           "min_data_loss_margin_seconds": None, "data_loss_occurred": False}  # fmt: skip
    assert partition(row, loss, FLAGS.health(topic="payments", partition=0)) == OK
    assert partition(row, loss, FLAGS.health(topic="orders", partition=0)) == WARN
    assert topic({"topic": "orders", "min_data_loss_margin_seconds": 600.0}, loss, NO_FLAGS) == BAD

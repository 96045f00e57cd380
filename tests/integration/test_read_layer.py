"""The read layer (`monitor.expose.read`) over synthetic rows with known values: every number
comes from the newest evaluation, unknown names give None, lists page and filter in SQL, and
history is bucketed without changing raw points."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Connection, Engine

from monitor.expose.read import clusters as read_clusters
from monitor.expose.read import history as read_history
from monitor.expose.read import lag as read_lag
from monitor.expose.read import topics as read_topics
from monitor.expose.read.cache import ReadCache
from monitor.expose.read.clusters import BrokerState, ClusterState
from monitor.expose.read.fields import Described
from monitor.expose.read.history import Commit, GroupLagPoint
from monitor.expose.read.lag import GroupMember
from monitor.expose.read.queries import ALL, Page, cluster_exists, latest_evaluation
from tests.fixtures.read_model import SEEN, T0, T1, fill, store_commit, store_offsets


@pytest.fixture(scope="module")
def conn(engine: Engine) -> Iterator[Connection]:
    with engine.begin() as setup:
        fill(setup)
    with engine.connect() as connection:
        yield connection


def test_clusters_carry_their_newest_evaluation_and_counts(conn: Connection) -> None:
    idle, prod = read_clusters.clusters(conn)
    assert prod == ClusterState(
        cluster="prod", cluster_id="abc", bootstrap="k1:9092,k2:9092", controller_id=1,
        first_seen=SEEN, last_seen=T1, brokers=3, brokers_up=2, brokers_down=1, topics=2, partitions=4,
        offline_partitions=0, under_replicated_partitions=2, under_min_isr_partitions=0,
        max_leader_imbalance=1.5, collection_age_seconds=12.0, unreachable=False, consumer_groups=2,
        lagging_groups=1, groups_by_status={"OK": 1, "WARN": 1},
        findings_by_severity={"critical": 1, "warning": 2}, evaluated_at=T1, kafka_version="3.9",
        unavailable=read_clusters.unavailable("3.9"), offset_lag_as_of=T1,
    )  # fmt: skip
    assert [u.feature for u in prod.unavailable] == [
        "kip848_groups",
        "simple_group_tombstone",
        "share_groups",
    ]
    assert (idle.cluster, idle.evaluated_at, idle.brokers, idle.consumer_groups) == ("idle", None, None, 0)
    assert (idle.kafka_version, idle.unavailable) == (None, [])
    assert idle.findings_by_severity == {"info": 1}
    assert read_clusters.cluster(conn, "prod") == prod
    assert read_clusters.cluster(conn, "nope") is None
    assert cluster_exists(conn, "idle") and not cluster_exists(conn, "nope")
    assert latest_evaluation(conn, "prod") == T1 and latest_evaluation(conn, "idle") is None


def test_brokers(conn: Connection) -> None:
    brokers = read_clusters.brokers(conn, "prod")
    assert [b.broker_id for b in brokers] == [1, 2, 3]
    assert brokers[2] == BrokerState(
        broker_id=3, host="k3", port=9092, rack="a", up=False, first_seen=SEEN, last_seen=T0, leaders=0,
        fair_share_leaders=2.0, leader_imbalance=0.0, non_preferred_leaders=0, replicas=3,
        disk_total_bytes=1000, disk_usable_bytes=250, disk_used_ratio=0.75, evaluated_at=T1,
    )  # fmt: skip
    assert read_clusters.brokers(conn, "idle") == []


def test_findings_are_open_most_severe_first_and_filterable(conn: Connection) -> None:
    every = read_clusters.findings(conn)
    assert [(f.rule, f.cluster, f.severity) for f in every.items] == [
        ("BrokerDown", "prod", "critical"),
        ("TimeUntilDataLoss", "prod", "warning"),
        ("PartitionReplicaLost", "prod", "warning"),
        ("CollectionStale", "idle", "info"),
    ]
    assert every.total == 4 and every.evaluated_at is None
    first = every.items[1]
    assert first.labels == {"cluster": "prod", "group_id": "billing", "topic": "orders", "partition": "0"}
    assert (first.state, first.first_seen, first.value) == ("firing", T0, 1800.0)
    prod = read_clusters.findings(conn, cluster="prod", severity=["warning"], page=Page(limit=1, offset=1))
    assert [f.rule for f in prod.items] == ["PartitionReplicaLost"]
    assert (prod.total, prod.evaluated_at) == (2, T1)
    assert read_clusters.findings(conn, rule=["BrokerDown"]).total == 1
    past_the_end = read_clusters.findings(conn, page=Page(limit=10, offset=10))
    assert (past_the_end.items, past_the_end.total) == ([], 4)


def test_topics_join_settings_evaluation_and_lagging_groups(conn: Connection) -> None:
    listing = read_topics.topics(conn, "prod")
    assert [t.topic for t in listing.items] == ["orders", "payments"], "the deleted topic is left out"
    orders, payments = listing.items
    assert (orders.partitions, orders.replication_factor, orders.cleanup_policy) == (3, 3, "delete")
    assert (orders.retention_ms, orders.retention_bytes, orders.min_insync_replicas) == (
        604800000,
        1000000,
        2,
    )
    assert (orders.size_bytes, orders.under_replicated_partitions, orders.lagging_groups) == (3000, 2, 1)
    assert (orders.min_time_until_data_loss_seconds, orders.evaluated_at) == (1800.0, T1)
    assert (orders.min_data_loss_margin_seconds, payments.min_data_loss_margin_seconds) == (1760.0, None)
    assert (payments.cleanup_policy, payments.retention_ms, payments.retention_bytes) == (
        "compact",
        None,
        None,
    )
    assert (payments.lagging_groups, payments.remote_storage) == (0, False)
    assert (listing.total, listing.evaluated_at) == (2, T1)
    assert [t.topic for t in read_topics.topics(conn, "prod", problems=True).items] == ["orders"]
    assert [t.topic for t in read_topics.topics(conn, "prod", search="pay").items] == ["payments"]
    assert read_topics.topics(conn, "prod", search="%").total == 0, "LIKE wildcards are literal"
    by_size = read_topics.topics(conn, "prod", sort="size_bytes", page=Page(limit=1))
    assert ([t.topic for t in by_size.items], by_size.total) == (["orders"], 2)


def test_a_topic_with_its_partitions_and_consumers(conn: Connection) -> None:
    detail = read_topics.topic(conn, "prod", "orders", page=Page(limit=2))
    assert detail is not None
    assert detail.configs == {
        "cleanup.policy": "delete", "min.insync.replicas": "2", "retention.bytes": "1000000",
        "retention.ms": "604800000",
    }  # fmt: skip
    assert [p.partition for p in detail.partitions.items] == [0, 1] and detail.partitions.total == 3
    first = detail.partitions.items[0]
    assert (first.leader, first.replicas, first.isr, first.preferred_leader) == (1, [1, 2, 3], [1, 2], 1)
    assert (first.replicas_lost, first.under_replicated, first.start_offset, first.end_offset) == (
        1,
        True,
        10,
        200,
    )
    assert (first.size_bytes, first.headroom_bytes, first.size_ratio) == (1000, 999000, 0.001)
    assert (first.lagging_groups, first.min_time_until_data_loss_seconds, first.data_loss_occurred) == (
        1,
        1800.0,
        False,
    )
    assert (first.min_data_loss_margin_seconds, detail.partitions.items[1].min_data_loss_margin_seconds) == (
        1760.0,
        None,
    )
    assert [
        (c.group_id, c.offset_lag, c.time_until_data_loss_seconds, c.data_loss_margin_seconds, c.status)
        for c in detail.consumers
    ] == [
        ("billing", 50, 1800.0, 1760.0, "WARN"),
        ("audit", 0, None, None, "OK"),
    ]
    third = read_topics.topic_partitions(conn, "prod", "orders", Page(limit=5, offset=2)).items
    assert [(p.partition, p.non_preferred_leader, p.preferred_leader) for p in third] == [(2, True, 3)]
    assert read_topics.topic(conn, "prod", "old") is None and read_topics.topic(conn, "prod", "nope") is None
    assert read_topics.topic_names(conn, "prod") == ["orders", "payments"]
    assert read_topics.end_offsets(conn, "prod", "orders") == [200, 120, 80]
    assert read_topics.end_offsets(conn, "prod", "nope") is None


def test_groups_are_the_newest_evaluation_worst_first(conn: Connection) -> None:
    listing = read_lag.groups(conn, "prod")
    assert [(g.group_id, g.status, g.offset_lag) for g in listing.items] == [
        ("billing", "WARN", 50),
        ("audit", "OK", 0),
    ]
    assert (listing.total, listing.evaluated_at) == (2, T1)
    assert [g.group_id for g in read_lag.groups(conn, "prod", sort="group_id").items] == ["audit", "billing"]
    by_margin = read_lag.groups(conn, "prod", sort="data_loss_margin_seconds").items
    assert [(g.group_id, g.data_loss_margin_seconds) for g in by_margin] == [
        ("billing", 1760.0),
        ("audit", None),
    ]
    assert [g.group_id for g in read_lag.groups(conn, "prod", lagging=True).items] == ["billing"]
    assert [g.group_id for g in read_lag.groups(conn, "prod", status=["OK"]).items] == ["audit"]
    assert [g.group_id for g in read_lag.groups(conn, "prod", search="ud").items] == ["audit"]
    assert read_lag.groups(conn, "idle").total == 0
    assert read_lag.group_ids(conn, "prod") == ["audit", "billing"]


def test_a_group_with_members_and_topics(conn: Connection) -> None:
    detail = read_lag.group(conn, "prod", "billing")
    assert detail is not None
    assert (
        detail.group.offset_lag,
        detail.group.time_until_data_loss_seconds,
        detail.group.data_loss_margin_seconds,
        detail.group.evaluated_at,
    ) == (50, 1800.0, 1760.0, T1)
    assert detail.members[0] == GroupMember("m1", "c-m1", "/10.0.0.1", None, ["orders:0", "orders:1"], T1)
    assert [(t.topic, t.offset_lag, t.data_loss_margin_seconds, t.status) for t in detail.topics] == [
        ("orders", 50, 1760.0, "WARN"),
        ("payments", 0, None, "OK"),
    ]
    assert read_lag.group(conn, "prod", "ghost") is None, "gone from the newest evaluation"
    assert read_lag.group_known(conn, "prod", "ghost") and not read_lag.group_known(conn, "prod", "nope")


def test_partition_lag_names_the_owner(conn: Connection) -> None:
    listing = read_lag.group_partitions(conn, "prod", "billing")
    assert [(p.topic, p.partition, p.offset_lag, p.owner, p.client_id) for p in listing.items] == [
        ("orders", 0, 50, "/10.0.0.1", "c-m1"),
        ("orders", 1, 0, "/10.0.0.1", "c-m1"),
        ("orders", 2, 0, "/10.0.0.2", "c-m2"),
        ("payments", 0, 0, "/10.0.0.2", "c-m2"),
    ]
    lagging = listing.items[0]
    assert (lagging.committed_offset, lagging.end_offset, lagging.lag_seconds, lagging.status) == (
        150,
        200,
        600.0,
        "WARN",
    )
    assert (lagging.lag_seconds_method, lagging.data_loss_limit) == ("exact", "time")
    assert (lagging.time_to_read_seconds, lagging.data_loss_margin_seconds) == (40.0, 1760.0)
    assert listing.items[1].data_loss_margin_seconds is None, "caught up: not at risk"
    assert read_lag.group_partitions(conn, "prod", "billing", topic="payments").total == 1
    assert read_lag.group_partitions(conn, "prod", "billing", lagging=True).total == 1
    assert read_lag.group_partitions(conn, "prod", "audit", page=ALL).items[0].owner is None


def test_history_is_raw_within_the_evaluation_interval_and_bucketed_beyond(conn: Connection) -> None:
    raw = read_history.group_history(
        conn, "prod", "billing", T0 - timedelta(minutes=1), T1 + timedelta(seconds=1)
    )
    assert raw.step_seconds == 1
    assert [(p.evaluated_at, p.offset_lag, p.status) for p in raw.points] == [
        (T0, 80, "WARN"),
        (T1, 50, "WARN"),
    ]
    assert raw.points[1] == GroupLagPoint(
        evaluated_at=T1, offset_lag=50, max_offset_lag=50, lag_seconds=600.0, max_lag_seconds=600.0,
        append_lag_seconds=None, commit_lag_seconds=None, consume_rate=1.5, produce_rate=1.5,
        time_until_data_loss_seconds=1800.0, data_loss_occurred=False, status="WARN", group_state="Stable",
        members=2,
    )  # fmt: skip
    one = read_history.group_history(conn, "prod", "billing", T1 - timedelta(hours=1), T1, max_points=1)
    assert one.step_seconds == 3600
    assert [
        (p.evaluated_at, p.offset_lag, p.consume_rate, p.time_until_data_loss_seconds) for p in one.points
    ] == [(T1, 80, 1.75, 1800.0)]
    ghost = read_history.group_history(conn, "prod", "ghost", T0 - timedelta(seconds=1), T1)
    assert [(p.status, p.group_state) for p in ghost.points] == [("ERR", "Empty")]
    partition = read_history.partition_history(
        conn, "prod", "billing", "orders", 0, T0 - timedelta(seconds=1), T1
    )
    assert [(p.committed_offset, p.end_offset, p.offset_lag) for p in partition.points] == [
        (100, 180, 80),
        (150, 200, 50),
    ]
    with pytest.raises(ValueError, match="end after"):
        read_history.group_history(conn, "prod", "billing", T1, T0)


def test_recent_commits_are_changes_of_the_committed_offset(conn: Connection) -> None:
    commits = read_history.recent_commits(conn, "prod", "billing", T0 - timedelta(hours=1))
    assert commits[("orders", 0)] == [Commit(100, T0, 80), Commit(150, T1, 50)]
    assert commits[("orders", 1)] == [Commit(120, T0, 0)], "an unchanged offset is one commit"
    assert read_history.recent_commits(conn, "prod", "billing", T1)[("orders", 0)] == [Commit(150, T1, 50)]
    assert read_history.recent_commits(conn, "prod", "billing", T0, per_partition=1)[("orders", 0)] == [
        Commit(150, T1, 50)
    ]


def test_every_field_of_every_record_is_described() -> None:
    from monitor.expose.read import clusters as c
    from monitor.expose.read import history as h
    from monitor.expose.read import lag as g
    from monitor.expose.read import topics as t
    from monitor.expose.read.queries import Listing

    records: list[type[Described]] = [
        c.ClusterState, c.Unavailable, c.BrokerState, c.Finding, t.TopicSummary, t.PartitionState, t.TopicConsumer,
        t.TopicDetail, g.GroupSummary, g.GroupMember, g.GroupTopicLag, g.GroupPartitionLag, g.GroupDetail,
        h.GroupLagPoint, h.PartitionLagPoint, h.LagHistory, Listing,
    ]  # fmt: skip
    missing = [
        f"{record.__name__}.{field.name}"
        for record in records
        for field in dataclasses.fields(record)  # type: ignore[arg-type]
        if not record.field_description(field.name)
    ]
    assert missing == []


@pytest.fixture
def stored(engine: Engine) -> Iterator[Connection]:
    """A connection whose writes to the store are rolled back after the test."""
    with engine.connect() as connection:
        try:
            yield connection
        finally:
            connection.rollback()


def _lagging(conn: Connection) -> tuple[int, list[str], int]:
    """prod's lagging groups: the cluster's count, the `lagging` list's ids, the count on orders."""
    count = read_clusters.cluster(conn, "prod")
    orders = read_topics.summary(conn, "prod", "orders")
    assert count is not None and orders is not None
    listed = [g.group_id for g in read_lag.groups(conn, "prod", lagging=True, sort="group_id").items]
    return count.lagging_groups, listed, orders.lagging_groups


def test_lagging_groups_are_counted_from_the_offsets_stored_after_the_evaluation(stored: Connection) -> None:
    assert _lagging(stored) == (1, ["billing"], 1), "without stored offsets, the evaluation's lag"
    sampled, committed = T1 + timedelta(seconds=5), T1 + timedelta(seconds=10)
    store_offsets(
        stored, "prod", sampled, {("billing", "orders", 0): (150, 200), ("audit", "orders", 0): (200, 200)}
    )
    assert _lagging(stored) == (1, ["billing"], 1)

    # billing reads to the end and audit rewinds: the commit stream's rows, no new evaluation
    store_commit(stored, "prod", ("billing", "orders", 0), 200, committed)
    store_commit(stored, "prod", ("audit", "orders", 0), 190, committed)
    assert _lagging(stored) == (1, ["audit"], 1)
    state = read_clusters.cluster(stored, "prod")
    assert state is not None and (state.consumer_groups, state.offset_lag_as_of) == (2, sampled)
    orders = read_topics.summary(stored, "prod", "orders")
    assert orders is not None and orders.offset_lag_as_of == sampled, "as of the older end offsets"
    store_commit(
        stored, "prod", ("audit", "payments", 0), 0, committed
    )  # a partition not sampled yet: not counted
    assert _lagging(stored) == (1, ["audit"], 1)
    assert latest_evaluation(stored, "prod") == T1
    # A group the evaluation does not have yet, whose offsets the store holds: listed from them.
    store_offsets(stored, "prod", sampled, {("newcomer", "signups", 0): (120, 200)})
    (new,) = read_lag.group_partitions(stored, "prod", "newcomer").items
    assert (new.offset_lag, new.status, new.offset_lag_as_of) == (80, None, sampled)
    evaluated = read_lag.group_partitions(stored, "prod", "billing")
    assert all(p.status is not None for p in evaluated.items), "an evaluated group lists its evaluated rows"


def test_before_the_first_evaluation_the_groups_are_those_the_store_has_offsets_of(
    stored: Connection,
) -> None:
    assert read_lag.groups(stored, "idle").total == 0
    at = T1 + timedelta(seconds=5)
    store_offsets(stored, "idle", at, {
        ("newcomer", "events", 0): (10, 40), ("newcomer", "events", 1): (5, 5), ("steady", "events", 0): (40, 40),
    })  # fmt: skip
    listing = read_lag.groups(stored, "idle", sort="group_id")
    assert listing.evaluated_at is None
    newcomer, steady = listing.items
    assert (newcomer.group_id, newcomer.offset_lag, newcomer.max_offset_lag, newcomer.partitions) == (
        "newcomer", 30, 30, 2,
    )  # fmt: skip
    assert (newcomer.status, newcomer.lag_seconds, newcomer.evaluated_at, newcomer.offset_lag_as_of) == (
        None, None, None, at,
    )  # fmt: skip
    assert (steady.group_id, steady.offset_lag) == ("steady", 0)
    assert [g.group_id for g in read_lag.groups(stored, "idle", lagging=True).items] == ["newcomer"]
    assert read_lag.groups(stored, "idle", status=["OK"]).total == 0, "no status before an evaluation"
    idle = read_clusters.cluster(stored, "idle")
    assert idle is not None
    assert (idle.consumer_groups, idle.lagging_groups, idle.offset_lag_as_of) == (2, 1, at)
    partitions = read_lag.group_partitions(stored, "idle", "newcomer")
    assert [(p.topic, p.partition, p.committed_offset, p.end_offset, p.offset_lag) for p in partitions.items] == [
        ("events", 0, 10, 40, 30), ("events", 1, 5, 5, 0),
    ]  # fmt: skip
    assert {(p.status, p.lag_seconds, p.offset_lag_as_of) for p in partitions.items} == {(None, None, at)}
    assert read_lag.group_partitions(stored, "idle", "newcomer", lagging=True).total == 1
    assert read_lag.group_partitions(stored, "idle", "newcomer", topic="other").total == 0
    detail = read_lag.group(stored, "idle", "newcomer")
    assert detail is not None and detail.group.evaluated_at is None
    assert (detail.group.offset_lag, detail.group.partitions, detail.group.offset_lag_as_of) == (30, 2, at)
    assert [(t.topic, t.partitions, t.offset_lag, t.max_offset_lag) for t in detail.topics] == [
        ("events", 2, 30, 30)
    ]
    assert read_lag.group(stored, "idle", "nobody") is None
    cached = ReadCache().of(stored, "idle")
    assert cached is not None and [g.group_id for g in cached.groups(sort="group_id").items] == [
        "newcomer",
        "steady",
    ]

"""What users read is as fresh as what is stored: on a real 1-node Kafka cluster and PostgreSQL,
the collectors (the offsets job and the commit stream) run while the evaluation stands still: its
last answer is the derived rows of the group written as it wrote them before the commits (no
Spark runs: the subject is that no evaluation happens). A commit of the group (a move forward,
then a rewind) shows at once in the HTTP API, the Burrow-compatible endpoints and the group page,
from the commit stream's row in the store, with how old each figure is, while the evaluation's
rows still hold the old lag; and in the lists of groups (API and page) and the offset lag series
of `/metrics`. The waits are a few seconds, far under the 30 s between two
evaluations."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, text

from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.settings import CollectConfig, DevKafkaConfig, MetricsConfig, NameFilter
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.paths import cache_dir, var_dir
from monitor.expose.web.app import create_app
from monitor.store.buffer import BufferedWriter
from monitor.store.partitions import ensure_partitions
from monitor.store.runs import RunRecorder
from tests.conditions import wait_for
from tests.fixtures.kafka import KafkaTestHelper, _started, _test_port
from tests.fixtures.read_model import insert

ONE_NODE_PORT_OFFSET = 60
"""This module's 1-node cluster's base port above the session cluster's (secured +20, share +50)."""
VISIBLE_WITHIN = 10.0
"""Seconds a commit may take to show: far under the evaluation interval (30 s) plus its run."""


@pytest.fixture(scope="module")
def one_node() -> Iterator[KafkaTestHelper]:
    config = DevKafkaConfig(nodes=1, base_port=_test_port() + ONE_NODE_PORT_OFFSET)
    with _started(DevKafkaCluster(config, var_dir() / "test" / "kafka-fresh", cache_dir())) as cluster:
        helper = KafkaTestHelper(cluster)
        try:
            yield helper
        finally:
            helper.close()


@pytest.fixture
def evaluated_once(one_node: KafkaTestHelper, engine: Engine) -> Iterator[tuple[ClusterCollector, str, str]]:
    """A group 90 messages behind on partition 0 and 20 on partition 1, collected with its commit
    stream live, and the evaluation's rows of that moment: (the collector, the topic, the group)."""
    topic = one_node.create_topic(partitions=2, replication_factor=1)
    one_node.produce(topic, [f"m{i}".encode() for i in range(100)], partition=0)
    one_node.produce(topic, [f"m{i}".encode() for i in range(30)], partition=1)
    group = f"fresh-{topic}"
    one_node.commit(group, topic, 0, 10)
    one_node.commit(group, topic, 1, 10)
    clock = SystemClock()
    writer = BufferedWriter(engine, 1_000_000, clock)
    config = one_node.cluster_config("fresh", topics=NameFilter(allow=[topic]), request_timeout_seconds=10)
    collector = ClusterCollector(
        config, engine, clock, RunRecorder(engine, clock, writer=writer), writer, CollectConfig()
    )
    collector.start()
    try:
        commits = collector.context.commits
        collector.run("commits")
        wait_for(lambda: commits.positioned, 60, "the commit stream to be positioned")
        for job in ("metadata", "offsets"):  # the offsets job's snapshot: the stream is live then
            collector.run(job)
        assert commits.live
        _evaluated(engine, topic, group, {0: (10, 100), 1: (10, 30)})
        yield collector, topic, group
    finally:
        collector.stop()


def _evaluated(engine: Engine, topic: str, group: str, offsets: dict[int, tuple[int, int]]) -> None:
    """The evaluation's rows of the group (partition -> (committed, end offset)), as of now."""
    at = datetime.now(UTC)
    lag = {p: end - committed for p, (committed, end) in offsets.items()}
    key = {"cluster": "fresh", "group_id": group, "evaluated_at": at}
    with engine.begin() as conn:
        ensure_partitions(conn, at, ahead_days=1)
        insert(conn, "derived_cluster", [{"cluster": "fresh", "evaluated_at": at}])
        insert(conn, "derived_group", [
            {**key, "offset_lag": sum(lag.values()), "max_offset_lag": max(lag.values()), "status": "OK",
             "partitions": len(lag), "topics": 1},
        ])  # fmt: skip
        insert(conn, "derived_group_topic", [
            {**key, "topic": topic, "offset_lag": sum(lag.values()), "max_offset_lag": max(lag.values()),
             "status": "OK", "partitions": len(lag)},
        ])  # fmt: skip
        insert(conn, "derived_group_partition", [
            {**key, "topic": topic, "partition": p, "committed_offset": committed, "end_offset": end,
             "offset_lag": lag[p], "status": "OK"}
            for p, (committed, end) in offsets.items()
        ])  # fmt: skip


def _partition_lags(client: TestClient, group: str) -> dict[int, dict[str, Any]]:
    answer = client.get(f"/api/v1/clusters/fresh/groups/{group}/lag")
    assert answer.status_code == 200, answer.text
    return {p["partition"]: p for p in answer.json()["items"]}


def _burrow_lags(client: TestClient, group: str) -> dict[int, int]:
    answer = client.get(f"/v3/kafka/fresh/consumer/{group}/lag")
    assert answer.status_code == 200, answer.text
    return {p["partition"]: p["current_lag"] for p in answer.json()["status"]["partitions"]}


def _evaluated_lag(engine: Engine, group: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT offset_lag FROM group_lag WHERE cluster = 'fresh' AND group_id = :g"),
                {"g": group},
            ).scalar_one()
        )


def test_a_commit_shows_in_the_api_burrow_and_the_page_before_the_next_evaluation(
    one_node: KafkaTestHelper, engine: Engine, evaluated_once: tuple[ClusterCollector, str, str]
) -> None:
    collector, topic, group = evaluated_once
    client = TestClient(create_app(engine, stale_after=timedelta(minutes=5)))
    lags = _partition_lags(client, group)
    assert {p: lags[p]["offset_lag"] for p in lags} == {0: 90, 1: 20}
    assert _evaluated_lag(engine, group) == 110

    # Forward on partition 0, then a rewind on partition 1: no evaluation, no offsets cycle. The
    # commits job's run supervises its stream as the daemon's every 15 s does (a stream left
    # unsupervised for long, as during a slow evaluation here, stops itself).
    commits = collector.context.commits
    for partition, offset, expected in ((0, 60, {0: 40, 1: 20}), (1, 5, {0: 40, 1: 25})):
        collector.run("commits")
        wait_for(lambda: commits.positioned, 60, "the commit stream to be positioned")
        one_node.commit(group, topic, partition, offset)
        wait_for(
            lambda e=expected: {p: v["offset_lag"] for p, v in _partition_lags(client, group).items()} == e,
            VISIBLE_WITHIN,
            f"the API to show the commit of {offset} on partition {partition}",
        )
        wait_for(lambda e=expected: _burrow_lags(client, group) == e, VISIBLE_WITHIN, "Burrow's lag")

    lags = _partition_lags(client, group)
    assert lags[1]["committed_offset"] == 5 and lags[1]["end_offset"] == 30
    for p in lags.values():
        assert p["offset_lag_as_of"] <= p["committed_offset_as_of"]
        assert p["offset_lag_as_of"] == min(p["committed_offset_as_of"], p["end_offset_as_of"])
    assert lags[1]["committed_offset_as_of"] > lags[1]["end_offset_as_of"], "the commit is newer than the end"

    detail = client.get(f"/api/v1/clusters/fresh/groups/{group}").json()
    assert (detail["group"]["offset_lag"], detail["group"]["max_offset_lag"]) == (65, 40)
    assert detail["group"]["offset_lag_as_of"] == min(p["offset_lag_as_of"] for p in lags.values())
    assert [(t["topic"], t["offset_lag"]) for t in detail["topics"]] == [(topic, 65)]
    status = client.get(f"/v3/kafka/fresh/consumer/{group}/status").json()["status"]
    assert (status["totallag"], status["maxlag"]["current_lag"]) == (65, 40)
    page = client.get(f"/clusters/fresh/groups/{group}")
    assert page.status_code == 200 and 'data-role="offset-lag"><strong>65</strong>' in page.text

    assert _evaluated_lag(engine, group) == 110, "the evaluation did not run again: the API read the store"


def test_records_produced_show_in_the_lag_within_seconds_and_the_lag_is_a_second_old(
    one_node: KafkaTestHelper, engine: Engine, evaluated_once: tuple[ClusterCollector, str, str]
) -> None:
    """The end offsets job lists the partitions' ends every second and the commit stream marks
    how far it read: records produced show in the API's and Burrow's lag with no offsets cycle
    and no evaluation, and a group that does not commit has a lag about a second old, not as old
    as the offsets job's last cycle."""
    collector, topic, group = evaluated_once
    client = TestClient(create_app(engine, stale_after=timedelta(minutes=5)))
    sampled = {
        p: datetime.fromisoformat(v["end_offset_as_of"]) for p, v in _partition_lags(client, group).items()
    }

    collector.run("commits")  # its supervisor, as every 15 s in the daemon
    collector.run("end_offsets")
    one_node.produce(topic, [f"n{i}".encode() for i in range(7)], partition=0)
    wait_for(
        lambda: {p: v["offset_lag"] for p, v in _partition_lags(client, group).items()} == {0: 97, 1: 20},
        VISIBLE_WITHIN,
        "the API to show the records produced",
    )
    wait_for(lambda: _burrow_lags(client, group) == {0: 97, 1: 20}, VISIBLE_WITHIN, "Burrow's lag")
    scraped = TestClient(
        create_app(
            engine, stale_after=timedelta(minutes=5), metrics=MetricsConfig(snapshot_check_seconds=0.2)
        )
    )
    wait_for(
        lambda: _offset_lag_series(scraped, group).get(("kafka_consumer_group_lag_in_offsets", "0")) == 97,
        VISIBLE_WITHIN,
        "/metrics to show the records produced: a stopped consumer's lag grows there too",
    )

    def ages() -> dict[int, float]:
        now = datetime.now(UTC)
        return {
            p: (now - datetime.fromisoformat(v["offset_lag_as_of"])).total_seconds()
            for p, v in _partition_lags(client, group).items()
        }

    time.sleep(3)  # the offsets job's sample, the only one, grows older: the lag served does not
    assert max(ages().values()) < 3, f"the lag served is about a second old: {ages()}"
    lags = _partition_lags(client, group)
    for p, lag in lags.items():
        assert datetime.fromisoformat(lag["end_offset_as_of"]) > sampled[p], (
            "listed after the offsets job's cycle"
        )
        assert lag["committed_offset"] == 10, "no commit: the sampled offset, held until the stream's mark"
    with engine.connect() as conn:
        listing = conn.execute(
            text("SELECT partitions, missed FROM end_offset_refreshes WHERE cluster = 'fresh'")
        ).one()
    assert tuple(listing) == (2, 0)
    assert _evaluated_lag(engine, group) == 110, "the evaluation did not run again: the API read the store"


def _listed(client: TestClient, group: str) -> dict[str, Any]:
    answer = client.get("/api/v1/clusters/fresh/groups", params={"search": group})
    assert answer.status_code == 200, answer.text
    (found,) = [g for g in answer.json()["items"] if g["group_id"] == group]
    return dict(found)


def _offset_lag_series(client: TestClient, group: str) -> dict[tuple[str, str], float]:
    """(metric, partition or '') -> the value of the group's offset lag series on /metrics."""
    answer = client.get("/metrics")
    assert answer.status_code == 200, answer.text
    return {
        (sample.name, sample.labels.get("partition", "")): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
        if sample.name.endswith("lag_in_offsets") and sample.labels.get("group") == group
    }


def test_a_commit_shows_in_the_list_of_groups_and_on_metrics_before_the_next_evaluation(
    one_node: KafkaTestHelper, engine: Engine, evaluated_once: tuple[ClusterCollector, str, str]
) -> None:
    collector, topic, group = evaluated_once
    metrics = MetricsConfig(snapshot_check_seconds=0.2)
    client = TestClient(create_app(engine, stale_after=timedelta(minutes=5), metrics=metrics))
    listed = _listed(client, group)
    assert (listed["offset_lag"], listed["max_offset_lag"]) == (110, 90)
    before = _offset_lag_series(client, group)
    assert before[("kafka_consumer_group_lag_in_offsets", "0")] == 90
    assert before[("kafka_consumer_group_sum_lag_in_offsets", "")] == 110

    commits = collector.context.commits
    collector.run("commits")
    wait_for(lambda: commits.positioned, 60, "the commit stream to be positioned")
    one_node.commit(group, topic, 0, 60)
    wait_for(
        lambda: _listed(client, group)["offset_lag"] == 60, VISIBLE_WITHIN, "the list API to show the commit"
    )
    listed = _listed(client, group)
    assert listed["max_offset_lag"] == 40 and listed["status"] == "OK", "the rest is the evaluation's"
    partitions = _partition_lags(client, group).values()
    assert listed["offset_lag_as_of"] == min(p["offset_lag_as_of"] for p in partitions), "as of the oldest"
    page = client.get("/clusters/fresh/groups", params={"q": group})
    assert page.status_code == 200 and 'data-role="offset-lag" title="as of' in page.text
    assert '">60</td>' in page.text
    # The topic's list of the groups reading it, in the API and on its page, as fresh.
    (reading,) = client.get(f"/api/v1/clusters/fresh/topics/{topic}").json()["consumers"]
    assert (reading["group_id"], reading["offset_lag"], reading["max_offset_lag"]) == (group, 60, 40)
    assert reading["offset_lag_as_of"] == listed["offset_lag_as_of"]
    page = client.get(f"/clusters/fresh/topics/{topic}")
    assert page.status_code == 200 and '">60</td>' in page.text.split('id="topic-groups"')[1]

    wanted = {
        ("kafka_consumer_group_lag_in_offsets", "0"): 40,
        ("kafka_consumer_group_lag_in_offsets", "1"): 20,
        ("kafka_consumer_group_sum_lag_in_offsets", ""): 60,
        ("kafka_consumer_group_max_lag_in_offsets", ""): 40,
        ("kafka_consumer_group_topic_sum_lag_in_offsets", ""): 60,
        ("kafka_consumer_group_topic_max_lag_in_offsets", ""): 40,
    }
    wait_for(
        lambda: _offset_lag_series(client, group) == wanted, VISIBLE_WITHIN, "/metrics to show the commit"
    )
    scraped = client.get("/metrics").text
    assert "kafka_health_offset_lag_age_seconds" in scraped

    # Caught up on both partitions: the counts of lagging groups and the `lagging` filter follow.
    lagging_before = _lagging_counts(client, topic)
    assert lagging_before[1:] == (1, 1, True)
    collector.run("commits")
    wait_for(lambda: commits.positioned, 60, "the commit stream to be positioned")
    one_node.commit(group, topic, 0, 100)
    one_node.commit(group, topic, 1, 30)
    # The cluster's count is kept for a second (fresh.KeptCounts), the others are read live.
    wait_for(
        lambda: _lagging_counts(client, topic) == (lagging_before[0] - 1, 0, 0, False),
        VISIBLE_WITHIN,
        "the cluster's and the topic's lagging groups and the lagging filter to show the group caught up",
    )
    cluster = client.get("/api/v1/clusters/fresh").json()
    assert cluster["offset_lag_as_of"] is not None and cluster["evaluated_at"] is not None
    assert _evaluated_lag(engine, group) == 110, "the evaluation did not run again: the lists read the store"


def _lagging_counts(client: TestClient, topic: str) -> tuple[int, int, int, bool]:
    """The lagging groups of the cluster, of the topic on its page's API and in the list of topics,
    and whether the topic's group is in the list of lagging groups."""
    cluster = client.get("/api/v1/clusters/fresh").json()
    detail = client.get(f"/api/v1/clusters/fresh/topics/{topic}").json()["topic"]
    (listed,) = client.get("/api/v1/clusters/fresh/topics", params={"search": topic}).json()["items"]
    assert detail["lagging_groups"] == listed["lagging_groups"], "the list and the page count alike"
    lagging = client.get("/api/v1/clusters/fresh/groups", params={"lagging": True, "search": topic}).json()
    return (
        cluster["lagging_groups"],
        detail["lagging_groups"],
        listed["lagging_groups"],
        f"fresh-{topic}" in [g["group_id"] for g in lagging["items"]],
    )


def test_before_the_first_evaluation_the_pages_the_api_and_metrics_show_the_stored_groups(
    one_node: KafkaTestHelper, engine: Engine
) -> None:
    topic = one_node.create_topic(partitions=1, replication_factor=1)
    one_node.produce(topic, [f"m{i}".encode() for i in range(20)], partition=0)
    group = f"new-{topic}"
    one_node.commit(group, topic, 0, 5)
    clock = SystemClock()
    writer = BufferedWriter(engine, 1_000_000, clock)
    config = one_node.cluster_config(
        "unevaluated", topics=NameFilter(allow=[topic]), request_timeout_seconds=10
    )
    collector = ClusterCollector(
        config, engine, clock, RunRecorder(engine, clock, writer=writer), writer, CollectConfig()
    )
    collector.start()
    try:
        for job in ("metadata", "offsets"):  # no commit stream: the offsets job reads the commits
            collector.run(job)
        client = TestClient(
            create_app(
                engine, stale_after=timedelta(minutes=5), metrics=MetricsConfig(snapshot_check_seconds=0.2)
            )
        )
        _before_the_first_evaluation(client, topic, group)
        # /metrics: the group's offset lag series from the stored offsets, none of its other series.
        offsets = {("kafka_consumer_group_lag_in_offsets", "0"): 15} | {
            (f"kafka_consumer_group_{kind}_lag_in_offsets", ""): 15
            for kind in ("sum", "max", "topic_sum", "topic_max")
        }
        assert _offset_lag_series(client, group) == offsets
        scraped = client.get("/metrics").text
        assert [
            line for line in scraped.splitlines() if f'group="{group}"' in line and "_in_offsets" not in line
        ] == []
        # Each offsets run of a cluster without an evaluation rebuilds the snapshot: a new group shows.
        one_node.commit(f"{group}-b", topic, 0, 12)
        collector.run("offsets")
        wait_for(
            lambda: _offset_lag_series(client, f"{group}-b") == {k: 8 for k in offsets},
            VISIBLE_WITHIN,
            "/metrics to show the new group's offset lag",
        )
        assert _offset_lag_series(client, group) == offsets
    finally:
        collector.stop()


def _before_the_first_evaluation(client: TestClient, topic: str, group: str) -> None:
    cluster = client.get("/api/v1/clusters/unevaluated").json()
    assert (cluster["evaluated_at"], cluster["consumer_groups"], cluster["lagging_groups"]) == (None, 1, 1)
    (listed,) = client.get("/api/v1/clusters/unevaluated/groups").json()["items"]
    assert (listed["group_id"], listed["offset_lag"], listed["max_offset_lag"]) == (group, 15, 15)
    assert (listed["status"], listed["lag_seconds"], listed["evaluated_at"]) == (None, None, None)
    assert listed["offset_lag_as_of"] == cluster["offset_lag_as_of"] is not None
    card = client.get("/").text.split('data-cluster="unevaluated"')[1].split("</section>")[0]
    assert "</span> of 1</dd>" in card, "the overview counts the stored group"
    page = client.get("/clusters/unevaluated/groups")
    assert page.status_code == 200 and group in page.text
    # The group's own lag, resource and page: from the stored offsets, while the evaluation starts.
    (lag,) = client.get(f"/api/v1/clusters/unevaluated/groups/{group}/lag").json()["items"]
    assert (lag["topic"], lag["partition"], lag["committed_offset"], lag["end_offset"], lag["offset_lag"]) == (
        topic, 0, 5, 20, 15,
    )  # fmt: skip
    assert (lag["status"], lag["lag_seconds"]) == (None, None) and lag["offset_lag_as_of"] is not None
    detail = client.get(f"/api/v1/clusters/unevaluated/groups/{group}").json()
    assert (detail["group"]["offset_lag"], detail["group"]["evaluated_at"]) == (15, None)
    assert [(t["topic"], t["offset_lag"]) for t in detail["topics"]] == [(topic, 15)]
    group_page = client.get(f"/clusters/unevaluated/groups/{group}")
    assert group_page.status_code == 200 and topic in group_page.text

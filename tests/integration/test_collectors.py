"""The collectors on the real cluster against known ground truth: records produced with known
timestamps, groups that consume and commit at known points."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from sqlalchemy import Engine

from monitor.collect.stage import ClusterCollector
from monitor.core.clock import SystemClock
from monitor.core.settings import CollectConfig, NameFilter
from monitor.kafka.timestamps import RecordTimestampReader
from monitor.store.buffer import BufferedWriter
from monitor.store.runs import RunRecorder
from tests.conditions import wait_for
from tests.fixtures.kafka import KafkaTestHelper
from tests.fixtures.sql import last_run, ms, rows

T0 = 1_700_000_000_000  # ms: records get T0 + i * 1000


@pytest.fixture
def make_collector(kafka: KafkaTestHelper, engine: Engine) -> Iterator[Any]:
    made: list[ClusterCollector] = []

    def make(
        name: str, topics: list[str], groups: list[str] | None = None, **collect: Any
    ) -> ClusterCollector:
        clock = SystemClock()
        config = kafka.cluster_config(
            name,
            topics=NameFilter(allow=topics),
            groups=NameFilter(allow=groups) if groups is not None else NameFilter(),
            request_timeout_seconds=10,
        )
        writer = BufferedWriter(engine, 1_000_000, clock)
        collector = ClusterCollector(
            config, engine, clock, RunRecorder(engine, clock, writer=writer), writer, CollectConfig(**collect)
        )
        collector.start()
        made.append(collector)
        return collector

    yield make
    for collector in made:
        collector.stop()


def test_exact_lag_timestamps_and_commit_observations(
    kafka: KafkaTestHelper, engine: Engine, make_collector: Any
) -> None:
    # The records are years old (T0): without retention.ms=-1 the test cluster's 5 s retention
    # check may delete them before they are consumed.
    topic = kafka.create_topic(partitions=1, replication_factor=3, config={"retention.ms": "-1"})
    kafka.produce(
        topic, [f"m{i}".encode() for i in range(100)], timestamps_ms=[T0 + i * 1000 for i in range(100)]
    )
    group = f"lagging-{topic}"
    assert kafka.consume_and_commit(group, topic, 40) == 40
    c = make_collector("exact", [topic])

    c.run("offsets")
    assert last_run(engine, "exact", "offsets")["status"] == "ok"
    (g,) = rows(engine, "SELECT * FROM latest_group_offsets WHERE cluster='exact' AND group_id=:g", g=group)
    assert (g["committed_offset"], g["end_offset"], g["lag"]) == (40, 100, 60)
    assert ms(g["committed_timestamp"]) == T0 + 40_000  # the oldest unconsumed record, exactly
    assert ms(g["consumed_timestamp"]) == T0 + 39_000  # the last consumed record
    assert g["timestamp_method"] == "exact"
    (p,) = rows(engine, "SELECT * FROM latest_partition_offsets WHERE cluster='exact' AND topic=:t", t=topic)
    assert (p["start_offset"], p["end_offset"]) == (0, 100)
    assert ms(p["start_timestamp"]) == T0 and ms(p["latest_timestamp"]) == T0 + 99_000
    assert p["timestamp_type"] == "CreateTime"
    (state,) = rows(
        engine, "SELECT state, members FROM group_states WHERE cluster='exact' AND group_id=:g", g=group
    )
    assert state["state"] == "Empty" and state["members"] == 0  # every consumer is gone: still sampled

    assert kafka.consume_and_commit(group, topic, 10) == 50
    c.run("offsets")
    (obs,) = rows(engine, "SELECT * FROM commit_observations WHERE cluster='exact' AND group_id=:g", g=group)
    assert (obs["previous_offset"], obs["committed_offset"]) == (40, 50)
    (g,) = rows(engine, "SELECT * FROM latest_group_offsets WHERE cluster='exact' AND group_id=:g", g=group)
    assert g["lag"] == 50
    (last,) = rows(engine, "SELECT * FROM latest_commits WHERE cluster='exact' AND group_id=:g", g=group)
    assert (last["committed_offset"], last["observed_at"]) == (50, obs["observed_at"])
    history = rows(
        engine,
        "SELECT committed_offset FROM group_offsets WHERE cluster='exact' AND group_id=:g ORDER BY sampled_at",
        g=group,
    )
    assert [h["committed_offset"] for h in history] == [40, 50]


def test_stopped_group_lag_keeps_growing(kafka: KafkaTestHelper, engine: Engine, make_collector: Any) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=1)
    kafka.produce(topic, [b"x"] * 10)
    group = f"dead-{topic}"
    kafka.consume_and_commit(group, topic, 10)  # then every consumer of the group is gone
    c = make_collector("dead", [topic])
    c.run("offsets")
    kafka.produce(topic, [b"y"] * 25)  # producers keep writing
    c.run("offsets")
    lags = rows(
        engine,
        "SELECT lag FROM group_offsets WHERE cluster='dead' AND group_id=:g ORDER BY sampled_at",
        g=group,
    )
    assert [r["lag"] for r in lags] == [0, 25]


def test_config_history_on_retention_change(
    kafka: KafkaTestHelper, engine: Engine, make_collector: Any
) -> None:
    topic = kafka.create_topic(config={"retention.ms": "3600000"})
    c = make_collector("cfg", [topic])
    c.run("configs")
    c.run("configs")  # unchanged: no new rows
    before = rows(
        engine,
        "SELECT name, value, source FROM topic_configs WHERE cluster='cfg' AND topic=:t AND valid_to IS NULL",
        t=topic,
    )
    assert {r["name"]: r["value"] for r in before}["retention.ms"] == "3600000"
    assert len(rows(engine, "SELECT 1 FROM topic_configs WHERE cluster='cfg' AND name='retention.ms'")) == 1

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry("retention.ms", "7200000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    kafka.admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    kafka.wait_for(
        lambda: (
            kafka.admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])[
                ConfigResource(ResourceType.TOPIC, topic)
            ]
            .result(timeout=10)["retention.ms"]
            .value
            == "7200000"
        ),
        30,
        "the new retention to be visible",
    )
    c.run("configs")
    history = rows(
        engine,
        "SELECT value, valid_to FROM topic_configs WHERE cluster='cfg' AND topic=:t AND name='retention.ms' ORDER BY valid_from",
        t=topic,
    )
    assert [h["value"] for h in history] == ["3600000", "7200000"]
    assert history[0]["valid_to"] is not None and history[1]["valid_to"] is None
    assert last_run(engine, "cfg", "configs")["counts"]["changes"] == 1


def test_log_dir_sizes_match_what_was_written(
    kafka: KafkaTestHelper, engine: Engine, make_collector: Any
) -> None:
    topic = kafka.create_topic(partitions=1, replication_factor=3)
    payload = 200 * 1024
    kafka.produce(topic, [b"z" * 1024] * 200)
    c = make_collector("dirs", [topic])
    kafka.wait_for(
        lambda: (
            c.run("log_dirs"),
            len(
                rows(
                    engine,
                    "SELECT DISTINCT broker_id FROM log_dir_sizes WHERE cluster='dirs' AND topic=:t AND size_bytes >= :n",
                    t=topic,
                    n=payload,
                )
            )
            == 3,
        )[1],
        30,
        "every replica to report the written bytes",
    )
    sizes = rows(
        engine,
        "SELECT broker_id, size_bytes FROM log_dir_sizes WHERE cluster='dirs' AND topic=:t ORDER BY sampled_at DESC, broker_id LIMIT 3",
        t=topic,
    )
    for row in sizes:  # record batch headers and per-record overhead only
        assert payload <= row["size_bytes"] <= payload * 1.25, row
    disks = rows(engine, "SELECT total_bytes, usable_bytes FROM broker_disks WHERE cluster='dirs'")
    assert disks and all(d["total_bytes"] > 0 and 0 < d["usable_bytes"] <= d["total_bytes"] for d in disks)


def test_data_loss_when_retention_deletes_past_committed(
    kafka: KafkaTestHelper, engine: Engine, make_collector: Any
) -> None:
    topic = kafka.create_topic(
        config={"retention.ms": "1000", "segment.ms": "500", "file.delete.delay.ms": "0"}
    )
    kafka.produce(topic, [b"old"] * 10)
    group = f"late-{topic}"
    kafka.consume_and_commit(group, topic, 2)

    def deleted() -> bool:
        kafka.produce(topic, [b"new"])  # rolls the active segment so the old one can expire
        low, _ = _watermarks(kafka, topic)
        return low > 2

    kafka.wait_for(deleted, 60, "retention to delete the old segment")
    c = make_collector("loss", [topic])
    c.run("offsets")
    (event,) = rows(engine, "SELECT * FROM data_loss_events WHERE cluster='loss' AND group_id=:g", g=group)
    assert event["committed_offset"] == 2 and event["start_offset"] > 2
    assert event["messages_lost"] == event["start_offset"] - 2
    c.run("offsets")  # the same loss is recorded once
    assert (
        len(rows(engine, "SELECT 1 FROM data_loss_events WHERE cluster='loss' AND group_id=:g", g=group)) == 1
    )
    assert last_run(engine, "loss", "offsets")["counts"]["data_loss"] == 1


def _watermarks(kafka: KafkaTestHelper, topic: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "watermarks"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        consumer.close()


def test_partial_run_when_a_broker_dies(kafka: KafkaTestHelper, engine: Engine, make_collector: Any) -> None:
    topic = kafka.create_topic(partitions=6, replication_factor=1)
    kafka.produce(topic, [b"a"] * 12, partition=0)
    # Every group of the cluster is described, those of the broker about to die among them: the
    # coordinator requests that could bring the process down through librdkafka (see
    # monitor/kafka/describe.py and groups.py) now fail only their groups.
    kafka.commit_groups({f"partial-{topic}-{i}": [TopicPartition(topic, 0, 1 + i % 12)] for i in range(40)})
    c = make_collector("partial", [topic])
    c.run("metadata")
    c.run("offsets")
    first = last_run(engine, "partial", "offsets")
    assert first["status"] == "ok", first
    assert first["counts"]["groups"] >= 40
    leaders = {
        r["partition"]: r["leader"]
        for r in rows(engine, "SELECT partition, leader FROM partitions WHERE cluster='partial'")
    }
    victim = leaders[0]
    kafka.kill_broker(victim)
    started = time.monotonic()
    c.run("offsets")
    took = time.monotonic() - started
    run = last_run(engine, "partial", "offsets")
    assert run["status"] == "partial", run
    assert run["counts"]["groups"] > 0, "the groups of the other coordinators were described"
    assert took < 60
    survivors = {p for p, leader in leaders.items() if leader != victim}
    latest = rows(
        engine,
        "SELECT partition, max(sampled_at) AS at FROM partition_offsets WHERE cluster='partial' GROUP BY partition",
    )
    newest = max(r["at"] for r in latest)
    written = {r["partition"] for r in latest if r["at"] == newest}
    assert survivors <= written and 0 not in written


def test_group_requests_that_all_go_unanswered_make_a_partial_run(
    kafka: KafkaTestHelper, engine: Engine, make_collector: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a broker that just died can do to a cycle: every group request times out while the
    # partitions on the other brokers still answer.
    from monitor.core.errors import KafkaUnavailableError

    topic = kafka.create_topic(partitions=2)
    kafka.produce(topic, [b"x"] * 3)
    kafka.consume_and_commit(f"unanswered-{topic}", topic, 1)
    c = make_collector("unanswered", [topic])
    c.run("offsets")

    def unanswered(*args: Any, **kwargs: Any) -> Any:
        raise KafkaUnavailableError(
            "cannot describe consumer groups on cluster 'unanswered': Local: Timed out"
        )

    monkeypatch.setattr(c.context.admin, "describe_groups", unanswered)
    monkeypatch.setattr(c.context.admin, "committed_offsets", unanswered)
    c.run("offsets")
    runs = rows(
        engine,
        "SELECT status, error, counts FROM collection_runs WHERE cluster='unanswered' AND job='offsets'"
        " ORDER BY started_at",
    )
    assert [r["status"] for r in runs] == ["ok", "partial"]
    assert runs[1]["counts"]["partitions"] == 2, "the partitions were still sampled"
    assert "no group description this cycle" in runs[1]["error"]
    assert "no committed offsets this cycle" in runs[1]["error"]


def test_samples_kept_across_a_postgres_restart(
    kafka: KafkaTestHelper, engine: Engine, pg_server: Any, make_collector: Any
) -> None:
    server = pg_server.local
    if server is None:
        pytest.skip("the test database comes from DATABASE_URL, a server this test cannot stop and start")
    topic = kafka.create_topic()
    kafka.produce(topic, [b"r"] * 5)
    kafka.consume_and_commit(f"pgr-{topic}", topic, 1)
    c = make_collector("pgrestart", [topic])
    c.run("offsets")
    server.down()
    try:
        # New records each time: the timestamps they need are in no cache, and newer than any the
        # store holds, so the cycle reads them from Kafka without asking the store.
        kafka.produce(topic, [b"s"] * 3)
        c.run("offsets")
        kafka.produce(topic, [b"t"] * 3)
        c.run("offsets")
        writer = c.context.writer
        assert writer.pending_writes == 4 and not writer.available  # two samples, two run rows
    finally:
        server.up()
    writer.flush()
    assert writer.pending_writes == 0
    samples = rows(
        engine, "SELECT count(DISTINCT sampled_at) AS n FROM group_offsets WHERE cluster='pgrestart'"
    )
    assert samples[0]["n"] == 3
    runs = rows(
        engine,
        "SELECT status, counts FROM collection_runs WHERE cluster='pgrestart' AND job='offsets' ORDER BY started_at",
    )
    assert [r["status"] for r in runs] == ["ok", "ok", "ok"]  # the outage's runs were queued too
    assert [r["counts"]["buffered"] > 0 for r in runs] == [False, True, True]  # and show the degraded window
    assert [r["counts"]["store_reads_skipped"] for r in runs] == [0, 0, 0], (
        "nothing the store could answer was asked of it (a read it cannot answer while down is "
        "skipped and counted: test_collect_failure_policy)"
    )
    assert [r["counts"]["timestamps_read"] > 0 for r in runs] == [True, True, True]
    latest = rows(
        engine,
        "SELECT end_offset FROM partition_offsets WHERE cluster='pgrestart' ORDER BY sampled_at DESC LIMIT 1",
    )
    assert latest[0]["end_offset"] == 11


def test_the_end_offsets_job_writes_each_second_what_moved_and_when_it_listed(
    engine: Engine, kafka: KafkaTestHelper, make_collector: Any
) -> None:
    """Between two offsets cycles the end offsets job lists the partitions' ends every second: a
    partition that moved is written, one that did not keeps its row while the cluster's listing
    time moves on (one row a second for a quiet cluster)."""
    topic = kafka.create_topic(partitions=2)
    kafka.produce(topic, [b"a", b"b"], partition=0)
    for partition in (0, 1):
        kafka.commit(f"ends-{topic}", topic, partition, 0)
    c = make_collector("ends", [topic], end_offsets_refresh_seconds=0.5)
    c.run("metadata")
    c.run("offsets")  # the partitions the groups read: the ones listed
    c.run("end_offsets")
    ends_sql = (
        "SELECT partition, end_offset, answered_at, missed FROM refreshed_end_offsets WHERE cluster = 'ends'"
    )
    listed_sql = "SELECT listed_at, partitions, missed FROM end_offset_refreshes WHERE cluster = 'ends'"

    def ends() -> dict[int, tuple[int, bool]]:
        return {r["partition"]: (r["end_offset"], r["missed"]) for r in rows(engine, ends_sql)}

    wait_for(lambda: ends() == {0: (2, False), 1: (0, False)}, 10, "the first listing")
    answered = {r["partition"]: r["answered_at"] for r in rows(engine, ends_sql)}
    kafka.produce(topic, [b"c"], partition=1)
    wait_for(lambda: ends() == {0: (2, False), 1: (1, False)}, 10, "the moved end")
    first_listed = rows(engine, listed_sql)[0]["listed_at"]
    wait_for(lambda: rows(engine, listed_sql)[0]["listed_at"] > first_listed, 10, "a later listing")

    unmoved = {r["partition"]: r["answered_at"] for r in rows(engine, ends_sql)}
    assert unmoved[0] == answered[0], "the unmoved partition was not written again"
    assert unmoved[1] > answered[1]
    (listing,) = rows(engine, listed_sql)
    assert (listing["partitions"], listing["missed"]) == (2, 0) and listing["listed_at"] >= unmoved[1]
    c.run("end_offsets")
    report = last_run(engine, "ends", "end_offsets")
    assert report["counts"]["listings"] >= 2 and report["counts"]["partitions_missed"] == 0


def test_time_of_sampling_is_now(engine: Engine, kafka: KafkaTestHelper, make_collector: Any) -> None:
    topic = kafka.create_topic()
    c = make_collector("clock", [topic])
    before = datetime.now(UTC)
    c.run("offsets")
    (row,) = rows(engine, "SELECT max(sampled_at) AS at FROM partition_offsets WHERE cluster='clock'")
    assert before <= row["at"] <= datetime.now(UTC)


def test_interpolation_fallback_when_the_budget_reads_nothing(
    kafka: KafkaTestHelper, engine: Engine, make_collector: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Even the shortest budget allowed (1 ms) may read a record on localhost: the reader's consumer
    # is connected since the collector started. The read is given the budget it is configured
    # with, spent before it starts, so that it reads nothing, every time.
    asked: list[float] = []
    real_read = RecordTimestampReader.read

    def spent(self: RecordTimestampReader, targets: Any, budget_seconds: float) -> Any:
        asked.append(budget_seconds)
        return real_read(self, targets, budget_seconds=0.0)

    monkeypatch.setattr(RecordTimestampReader, "read", spent)
    topic = kafka.create_topic()
    group = f"interp-{topic}"
    c = make_collector("interp", [topic], timestamp_budget_seconds=0.001)  # the shortest allowed
    seen: list[datetime] = []
    for _ in range(3):
        kafka.produce(topic, [b"i"] * 10)
        c.run("offsets")
        seen.append(
            rows(engine, "SELECT max(sampled_at) AS at FROM partition_offsets WHERE cluster='interp'")[0][
                "at"
            ]
        )
        time.sleep(0.3)
    kafka.commit(group, topic, 0, 15)  # appended between the first and the second sample
    c.run("offsets")
    run = last_run(engine, "interp", "offsets")
    (g,) = rows(engine, "SELECT * FROM latest_group_offsets WHERE cluster='interp' AND group_id=:g", g=group)
    assert g["lag"] == 15
    assert asked and set(asked) == {0.001}  # the configured budget reached the reader
    assert run["counts"]["exact"] == 0 and run["counts"]["timestamps_unread"] > 0
    assert g["timestamp_method"] == "interpolated"
    assert seen[0] <= g["committed_timestamp"] <= seen[1]
    assert 0 < g["timestamp_error_ms"] <= ms(seen[1]) - ms(seen[0])  # type: ignore[operator]


def test_a_partition_under_min_isr_keeps_its_end_offset_and_lag(
    kafka: KafkaTestHelper, engine: Engine, make_collector: Any
) -> None:
    # RF 3 and min.insync.replicas 3: stopping one broker puts the partition under min ISR. Its
    # leader stopped while records were being written, the new leader's epoch starts past its high
    # watermark, which Kafka 4 no longer advances: ListOffsets latest answers OFFSET_NOT_AVAILABLE.
    topic = kafka.create_topic(partitions=1, replication_factor=3, config={"min.insync.replicas": "3"})
    kafka.produce(topic, [b"x"] * 10, partition=0)
    group = f"held-{topic}"
    kafka.commit(group, topic, 0, 4)
    c = make_collector("held", [topic], [group])
    c.run("metadata")
    c.run("offsets")
    assert last_run(engine, "held", "offsets")["status"] == "ok"
    sql = """SELECT o.end_offset, o.end_offset_method, o.end_offset_listed_at, o.sampled_at, g.lag
             FROM latest_partition_offsets o
             JOIN latest_group_offsets g USING (cluster, topic, partition)
             WHERE o.cluster = 'held'"""

    def stop_the_leader_while_writing() -> int:
        c.run("metadata")
        (leader,) = [r["leader"] for r in rows(engine, "SELECT leader FROM partitions WHERE cluster='held'")]
        writing = threading.Event()
        writing.set()

        def write() -> None:
            producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "acks": "1", "linger.ms": 0})
            while writing.is_set():
                producer.produce(topic, b"y", partition=0)
                producer.poll(0.002)
            producer.flush(10)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            time.sleep(1)
            kafka.stop_broker(leader)
            time.sleep(2)
        finally:
            writing.clear()
            writer.join(30)
        return int(leader)

    def in_sync() -> bool:
        kafka.renew_admin()
        partition = kafka.admin.list_topics(topic, timeout=10).topics[topic].partitions[0]
        return len(partition.isrs) == 3

    # Whether the new leader was elected past its high watermark is a race with the writes (its
    # replica must not have heard of the old leader's last high watermark yet); it nearly always
    # is. When it was not, the broker comes back, the replicas catch up, and the test stops the
    # leader again.
    runs: list[dict[str, Any]] = []
    for _attempt in range(5):
        leader = stop_the_leader_while_writing()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            before = rows(engine, sql)[0]
            c.run("offsets")
            runs.append(last_run(engine, "held", "offsets"))
            if runs[-1]["counts"].get("end_offsets_last_known") and runs[-1]["status"] == "ok":
                break
            time.sleep(1)
        if runs[-1]["counts"].get("end_offsets_last_known"):
            break
        kafka.start_broker(leader)
        kafka.wait_for(in_sync, 90, "the three replicas in sync again", ignore=(KafkaException,))
    assert runs and runs[-1]["counts"].get("end_offsets_last_known") == 1, runs
    assert runs[-1]["status"] == "ok", "a partition that cannot move is not a failed collection"
    (latest,) = rows(engine, sql)
    assert latest["end_offset_method"] == "last_known"
    assert latest["end_offset"] == before["end_offset"] >= 10, "the last end offset listed"
    assert latest["end_offset_listed_at"] is not None
    assert latest["end_offset_listed_at"] < latest["sampled_at"]
    assert latest["lag"] == latest["end_offset"] - 4, "lag against the last known end offset"
    c.run("offsets")
    again = last_run(engine, "held", "offsets")
    assert again["status"] == "ok" and again["counts"]["end_offsets_last_known"] == 1, again

    kafka.start_broker(leader)
    kafka.wait_for(
        lambda: (c.run("offsets"), rows(engine, sql)[0]["end_offset_method"] == "listed")[1],
        90,
        "the end offset to be listed again",
    )

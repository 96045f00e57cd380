"""The collectors' partial-failure policy (monitor/collect/jobs/offsets.py, metadata.py), on the
fake cluster of monitor/kafka/fake.py: what fails a run, what makes it partial, what is neither.
PostgreSQL is out of the picture: the writer records the batches it is handed and says the store
is down, so the cycle's store read is skipped."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import pytest

from monitor.collect.jobs import share_groups
from monitor.collect.jobs.share_groups import SHARE_GROUPS
from monitor.collect.recall import KEEP_CYCLES, TimestampCache
from monitor.core.clock import to_millis
from monitor.core.errors import KafkaUnavailableError
from monitor.core.records import (
    END_OFFSET_LAST_KNOWN,
    END_OFFSET_LISTED,
    METHOD_EXACT,
    METHOD_NONE,
    RecordTimestamp,
)
from monitor.core.settings import CollectConfig
from monitor.core.share_groups import ShareGroups
from tests.fixtures.collect import T0, Rig, fake_context


@pytest.fixture
def rig() -> Rig:
    """Topic `orders` (3 partitions, RF 1: partition p led by broker p+1) with 10 records each,
    appended a second apart; group `billing` committed at 4 on every partition."""
    rig = Rig()
    rig.kafka.create_topic("orders", 3, 1)
    base = to_millis(T0) - 60_000
    for p in range(3):
        rig.kafka.produce("orders", p, timestamps_ms=[base + 1000 * i for i in range(10)])
    rig.kafka.commit("billing", {("orders", p): 4 for p in range(3)})
    return rig


def test_a_healthy_cycle_measures_lag_from_the_records_themselves(rig: Rig) -> None:
    run = rig.cycle()

    assert run.problems == []
    assert run.counts["partitions"] == 3 and run.counts["group_partitions"] == 3
    sample = rig.lags()[("billing", "orders", 0)]
    assert (sample.lag, sample.timestamp_method) == (6, METHOD_EXACT)
    assert sample.committed_timestamp_ms == to_millis(T0) - 60_000 + 4000, (
        "the record at the committed offset"
    )
    assert sample.consumed_timestamp_ms == to_millis(T0) - 60_000 + 3000
    assert run.counts["store_reads_skipped"] == 1, "the store is down: its read is skipped, once"


def test_a_coordinator_that_does_not_answer_fails_its_groups_alone(rig: Rig) -> None:
    rig.kafka.commit("audit", {("orders", 0): 2})
    silent = rig.kafka.coordinator("billing")
    assert silent is not None
    other = next(g for g in (f"audit-{n}" for n in range(50)) if rig.kafka.coordinator(g) != silent)
    rig.kafka.commit(other, {("orders", 1): 7})
    rig.kafka.silence_coordinator(silent)

    run = rig.cycle()

    assert any(p.startswith("committed offsets of group billing") for p in run.problems)
    assert any(p.startswith("describe group billing") for p in run.problems)
    assert (other, "orders", 1) in rig.lags(), "the other coordinator's groups are sampled"
    assert ("billing", "orders", 0) not in rig.lags()
    assert run.counts["partitions"] == 3


def test_no_group_answering_at_all_still_samples_the_partitions(rig: Rig) -> None:
    rig.cycle()
    rig.kafka.fail("committed_offsets")
    rig.kafka.fail("describe_groups")

    run = rig.cycle()

    assert any(p.startswith("no committed offsets this cycle") for p in run.problems)
    assert any(p.startswith("no group description this cycle") for p in run.problems)
    assert run.counts["partitions"] == 3
    assert rig.writer.observed() == []
    rig.kafka.commit("billing", {("orders", 0): 9})
    rig.cycle()
    moved = rig.writer.observed()
    assert [(o.partition, o.previous_offset, o.committed_offset) for o in moved] == [(0, 4, 9)], (
        "a cycle without committed offsets does not forget the previous ones"
    )


def test_a_broker_dying_mid_cycle_fails_its_partitions_only(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = rig.context.admin
    fetch = admin.committed_offsets

    def then_broker_2_dies(group_ids: Any) -> Any:
        answer = fetch(group_ids)
        rig.kafka.stop_broker(2)
        return answer

    monkeypatch.setattr(admin, "committed_offsets", then_broker_2_dies)
    run = rig.cycle()

    assert run.problems == ["offsets of partition orders:1: the leader did not answer within 10s"]
    assert sorted(rig.partitions()) == [("orders", 0), ("orders", 2)]
    lags = rig.lags()
    assert lags[("billing", "orders", 1)].lag is None, "its committed offset is kept, without an end"
    assert lags[("billing", "orders", 0)].lag == 6


def test_listing_groups_failing_falls_back_to_the_groups_seen_before(rig: Rig) -> None:
    rig.kafka.fail("list_group_ids")
    with pytest.raises(KafkaUnavailableError):
        rig.cycle()  # never listed: nothing to stand in, the run fails
    rig.cycle()
    rig.kafka.fail("list_group_ids")

    run = rig.cycle()

    assert len(run.problems) == 1
    assert "sampling the 1 groups seen before" in run.problems[0]
    assert ("billing", "orders", 0) in rig.lags()


def test_a_cluster_that_does_not_answer_fails_the_run(rig: Rig) -> None:
    for broker in (1, 2, 3):
        rig.kafka.stop_broker(broker)

    with pytest.raises(KafkaUnavailableError, match="cannot list consumer groups on cluster 'prod'"):
        rig.cycle()
    assert rig.writer.writes == [], "nothing written"


def test_an_end_offset_held_back_under_min_isr_keeps_its_last_known_value() -> None:
    rig = Rig()
    rig.kafka.create_topic("payments", 1, 2, {"min.insync.replicas": "2"})
    rig.kafka.produce("payments", 0, count=8)
    rig.kafka.commit("ledger", {("payments", 0): 3})
    first = rig.cycle()
    listed_at = to_millis(first.started_at)
    assert rig.offsets.critical_changed is False

    rig.kafka.shrink_isr("payments", 0, [1])
    rig.kafka.produce("payments", 0, count=5)  # written by the leader, not visible past the HW
    runs = [rig.cycle(), rig.cycle()]

    assert [r.problems for r in runs] == [[], []], "a partition that cannot move has not failed"
    assert [r.counts["end_offsets_last_known"] for r in runs] == [1, 1]
    held = rig.partitions()[("payments", 0)]
    assert (held.offsets.end, held.end_offset_method, held.end_offset_listed_at_ms) == (
        8,
        END_OFFSET_LAST_KNOWN,
        listed_at,
    )
    assert rig.lags()[("ledger", "payments", 0)].lag == 5
    assert rig.critical == ["prod"], "one evaluation asked, when the partition got held back"

    rig.kafka.shrink_isr("payments", 0, [1, 2])
    rig.cycle()
    back = rig.partitions()[("payments", 0)]
    assert (back.offsets.end, back.end_offset_method) == (13, END_OFFSET_LISTED)
    assert rig.critical == ["prod", "prod"], "the set of held-back partitions changed again"


def test_a_held_back_partition_never_listed_is_a_problem() -> None:
    rig = Rig()
    rig.kafka.create_topic("payments", 1, 2, {"min.insync.replicas": "2"})
    rig.kafka.shrink_isr("payments", 0, [1])

    run = rig.cycle()

    assert len(run.problems) == 1
    assert run.problems[0].startswith("offsets of partition payments:0: Broker: Offset not available")
    assert run.problems[0].endswith("and no end offset is known")
    assert rig.partitions() == {}


def test_records_the_budget_left_unread_are_not_a_problem_and_say_so(rig: Rig) -> None:
    rig.kafka.reader_capacity = 0

    run = rig.cycle()

    assert run.problems == []
    assert run.counts["timestamps_unread"] == run.counts["timestamps_needed"] > 0
    sample = rig.lags()[("billing", "orders", 0)]
    assert (sample.lag, sample.timestamp_method, sample.committed_timestamp_ms) == (6, METHOD_NONE, None)


def test_records_read_once_are_not_read_again(rig: Rig) -> None:
    first = rig.cycle()
    second = rig.cycle()

    assert first.counts["timestamps_read"] > 0
    assert second.counts["timestamps_read"] == 0, "the cycle's records all come from memory"
    assert rig.batch().record_timestamps == []


def test_a_group_fallen_off_the_log_is_a_data_loss_and_asks_for_an_evaluation(rig: Rig) -> None:
    rig.cycle()
    rig.kafka.delete_records("orders", 2, 7)

    run = rig.cycle()

    losses = rig.batch().data_loss
    assert [(e.partition, e.committed_offset, e.start_offset, e.messages_lost) for e in losses] == [
        (2, 4, 7, 3)
    ]
    assert run.counts["data_loss"] == 1
    assert rig.critical == ["prod"]
    rig.cycle()
    assert rig.critical == ["prod"], "the same loss asks once"


def test_metadata_sees_a_broker_go_and_its_partition_offline(rig: Rig) -> None:
    rig.cycle(rig.metadata, "metadata")
    assert rig.context.topology is not None
    assert sorted(rig.context.topology.partitions) == [("orders", 0), ("orders", 1), ("orders", 2)]
    rig.kafka.stop_broker(3)

    run = rig.cycle(rig.metadata, "metadata")

    assert run.counts["brokers"] == 2
    assert run.counts["offline"] == 1, "orders:2 had its only replica on broker 3"
    assert rig.critical == ["prod"]
    assert rig.context.topology.leaders == {("orders", 0): 1, ("orders", 1): 2}


def test_a_topic_deleted_after_the_listing_is_a_problem_of_the_run_not_its_failure(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Listed by one broker, unknown to the one asked to describe it (deleted meanwhile): the
    # others are sampled and the run says which one it could not describe.
    listed = rig.context.admin.list_topic_names
    monkeypatch.setattr(
        rig.context.admin, "list_topic_names", lambda include_internal: [*listed(include_internal), "gone"]
    )

    run = rig.cycle(rig.metadata, "metadata")
    offsets = rig.cycle()

    assert run.problems == ["topic gone could not be described"]
    assert rig.context.topology is not None
    assert sorted(rig.context.topology.partitions) == [("orders", 0), ("orders", 1), ("orders", 2)]
    assert offsets.counts["partitions"] == 3


def test_groups_of_other_types_are_counted_by_type_and_never_fail_a_cycle(rig: Rig) -> None:
    rig.kafka.unwatched_groups = {"queue-a": "share", "queue-b": "share", "app-1": "streams"}

    run = rig.cycle(rig.metadata, "metadata")
    offsets = rig.cycle()

    assert (run.counts["share_groups_not_watched"], run.counts["streams_groups_not_watched"]) == (2, 1)
    assert run.problems == [] and offsets.problems == []
    assert {s.committed.group_id for s in rig.batch().group_offsets} == {"billing"}


def test_the_timestamp_cache_evicts_the_least_recently_used() -> None:
    cache = TimestampCache(max_entries=2)
    a, b, c = (RecordTimestamp("t", 0, o, o, 1000 + o) for o in range(3))
    cache.put_many([a, b])
    assert cache.get_many([("t", 0, 0)]) == {("t", 0, 0): a}  # a is now the most recent

    cache.put_many([c])

    assert len(cache) == 2
    assert ("t", 0, 1) not in cache, "b was the least recently used"
    assert cache.get_many([("t", 0, 0), ("t", 0, 2)]) == {("t", 0, 0): a, ("t", 0, 2): c}


def test_the_timestamp_cache_forgets_what_was_not_asked_for_in_its_cycles() -> None:
    cache = TimestampCache(max_entries=100, keep_cycles=2)
    a, b = (RecordTimestamp("t", 0, o, o, 1000 + o) for o in range(2))
    cache.put_many([a, b])
    cache.next_cycle()
    assert cache.get_many([("t", 0, 0)]) == {("t", 0, 0): a}, "asked for: kept two more cycles"
    cache.next_cycle()

    assert len(cache) == 1 and ("t", 0, 1) not in cache, "b was learnt two cycles ago and not asked for"
    assert ("t", 0, 0) in cache
    cache.next_cycle()
    assert len(cache) == 0


def test_the_timestamp_cache_says_which_records_the_store_may_hold() -> None:
    cache = TimestampCache(max_entries=1, keep_cycles=1)
    assert cache.may_be_stored(("t", 0, 99)), "the store's marks unknown: any record"
    cache.learn_marks({("t", 0): 10})
    cache.learn_marks({("t", 0): 1})  # learnt once
    assert cache.may_be_stored(("t", 0, 10)) and not cache.may_be_stored(("t", 0, 11))
    assert not cache.may_be_stored(("t", 1, 0)), "nothing stored of that partition"
    a, b = (RecordTimestamp("t", 1, o, o, 1_000 + o, "CreateTime") for o in (20, 30))
    cache.put_many([a])
    assert not cache.may_be_stored(("t", 1, 20)), "in memory"
    cache.put_many([b])  # evicts a (one entry at most)
    assert cache.may_be_stored(("t", 1, 20)) and cache.may_be_stored(("t", 1, 5))
    assert not cache.may_be_stored(("t", 1, 21)), "above every record dropped"
    cache.next_cycle()  # b goes: not asked for within one cycle
    assert cache.may_be_stored(("t", 1, 30)) and not cache.may_be_stored(("t", 1, 31))


def test_the_offsets_job_keeps_the_timestamps_its_cycles_ask_for_and_drops_offsets_passed(rig: Rig) -> None:
    rig.cycle()
    rig.cycle()
    cache = rig.offsets.cache
    assert all(("orders", p, 4) in cache for p in range(3)), "the committed offsets' records"
    rig.kafka.commit("billing", {("orders", 0): 6})
    base = to_millis(T0)
    runs = []
    for n in range(KEEP_CYCLES + 1):
        rig.kafka.produce("orders", 1, timestamps_ms=[base + n])  # partition 1 moves: its target is asked
        runs.append(rig.cycle())

    assert ("orders", 0, 4) not in cache, "the offset billing moved past is not asked for again"
    assert ("orders", 1, 4) in cache, "billing still at 4 on a partition that moves: asked every cycle"
    assert [r.counts["timestamps_read"] for r in runs[1:]] == [1] * KEEP_CYCLES, (
        "after billing's move, each cycle reads from Kafka only the record appended since the "
        "previous one (partition 1's newest); the others it asks for (its oldest, billing's at 4) "
        "are in memory"
    )


class CountingEngine:
    """An engine whose connections answer nothing themselves (the store reads are patched)."""

    def __init__(self) -> None:
        self.connections = 0

    @contextmanager
    def connect(self) -> Iterator[None]:
        self.connections += 1
        yield None


def test_a_cycle_reads_the_store_once_and_what_memory_holds_never(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: dict[str, list[Any]] = {"timestamps": [], "history": [], "committed": []}
    stored = RecordTimestamp("orders", 0, 4, 4, 1_000, "CreateTime")

    def cached(conn: object, cluster: str, keys: list[Any]) -> dict[Any, Any]:
        asked["timestamps"].append(sorted(keys))
        return {("orders", 0, 4): stored} if ("orders", 0, 4) in keys else {}

    def brackets(conn: object, cluster: str, targets: set[Any], since: datetime) -> dict[Any, Any]:
        asked["history"].append(sorted(targets))
        return {}

    def committed(conn: object, cluster: str) -> dict[Any, Any]:
        asked["committed"].append(cluster)
        return {("billing", "orders", 0): (2, None)}

    monkeypatch.setattr("monitor.collect.recall.cached_timestamps", cached)
    monkeypatch.setattr("monitor.collect.recall.end_offset_brackets", brackets)
    monkeypatch.setattr("monitor.collect.recall.latest_committed", committed)
    monkeypatch.setattr("monitor.collect.recall.cached_offset_marks", lambda *args: {("orders", 0): 4})
    engine = CountingEngine()
    rig.context.engine = engine  # type: ignore[assignment]
    rig.writer.available = True

    first = rig.cycle()

    assert engine.connections == 1, "one read for the whole cycle"
    assert first.counts["store_reads_skipped"] == 0
    assert len(asked["timestamps"]) == 1 and ("orders", 0, 4) in asked["timestamps"][0]
    assert asked["history"] == [
        [("orders", 0, 3), ("orders", 1, 3), ("orders", 1, 4), ("orders", 2, 3), ("orders", 2, 4)]
    ], "not around orders:0:4, whose record the persisted cache holds"
    assert asked["committed"] == ["prod"]
    assert rig.lags()[("billing", "orders", 0)].committed_timestamp_ms == 1_000, "the stored record is used"
    observed = rig.writer.observed()
    assert [(o.partition, o.previous_offset, o.committed_offset) for o in observed] == [(0, 2, 4)]

    rig.cycle()

    assert engine.connections == 1, "nothing new to ask: memory holds every record, the commits are known"


def test_the_store_is_asked_only_for_records_it_may_hold(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the store's highest offsets are known, a record above them and above every one
    memory dropped is read from Kafka without asking the store; one at or below them, not in
    memory, is asked for."""
    asked: list[list[Any]] = []
    marks = {("orders", 0): 6, ("orders", 1): 4}

    def cached(conn: object, cluster: str, keys: list[Any]) -> dict[Any, Any]:
        asked.append(sorted(keys))
        return {}

    monkeypatch.setattr("monitor.collect.recall.cached_timestamps", cached)
    monkeypatch.setattr("monitor.collect.recall.end_offset_brackets", lambda *args: {})
    monkeypatch.setattr("monitor.collect.recall.latest_committed", lambda *args: {})
    monkeypatch.setattr("monitor.collect.recall.cached_offset_marks", lambda *args: marks)
    rig.context.engine = CountingEngine()  # type: ignore[assignment]
    rig.writer.available = True
    rig.cycle()
    assert asked and ("orders", 2, 4) in asked[0], "the marks unknown: every record memory lacks"
    asked.clear()

    rig.kafka.commit("billing", {("orders", 0): 5, ("orders", 1): 7, ("orders", 2): 8})
    run = rig.cycle()

    assert asked == [[("orders", 0, 5)]], "orders:1:7 and orders:2:8 are above what the store holds"
    assert run.counts["timestamps_read"] >= 3, "all three read from Kafka"
    lags = rig.lags()
    assert lags[("billing", "orders", 2)].committed_timestamp_ms == to_millis(T0) - 60_000 + 8000


class CountingShareGroups:
    """A share-group client whose cluster has none until `available` is set; counts the asks."""

    def __init__(self) -> None:
        self.asked = 0
        self.available = False

    def start(self) -> None: ...

    def close(self) -> None: ...

    def share_groups(self, watches: Callable[[str], bool]) -> ShareGroups:
        self.asked += 1
        if self.available:
            return ShareGroups(True)
        return ShareGroups(False, reason="not available: the brokers answer no ShareGroupDescribe")


def test_a_cluster_without_share_groups_is_asked_again_only_every_few_minutes(rig: Rig) -> None:
    client = CountingShareGroups()
    context = fake_context(
        rig.kafka, rig.writer, rig.clock, CollectConfig(), more={SHARE_GROUPS.name: client}
    )
    job = share_groups.build(context)
    runs = [rig.cycle(job, "share_groups") for _ in range(4)]  # 15 s apart

    assert client.asked == 1
    assert [r.counts.get("not_available") for r in runs] == [1, 1, 1, 1]
    assert [r.counts.get("not_asked", 0) for r in runs] == [0, 1, 1, 1]
    assert all(r.problems == [] for r in runs)
    assert [label for label, _ in rig.writer.writes] == ["prod:share_groups"] * 4, (
        "each run writes its answer"
    )

    client.available = True  # share.version turned on: seen at the next ask, not before
    rig.clock.advance(share_groups.RECHECK_SECONDS)
    run = rig.cycle(job, "share_groups")
    assert client.asked == 2 and "not_available" not in run.counts and run.counts["share_groups"] == 0
    rig.cycle(job, "share_groups")
    assert client.asked == 3, "an available cluster is asked every run"

"""The offsets job works only on what moved: a group-partition whose committed offset and
partition offsets did not move keeps its sample, and its row is carried in the store from the
previous batch's instead of sent (monitor/collect/jobs/offsets.py, lag.unmoved_*). On the fake
cluster, with the recording writer of the failure-policy tests."""

from __future__ import annotations

from monitor.core.clock import to_millis
from monitor.core.records import METHOD_EXACT, METHOD_NONE, OffsetsHistory
from tests.fixtures.collect import T0, Rig


def _rig() -> Rig:
    """Topic `orders` (3 partitions, 10 records each, a second apart); group `billing` at 4 on
    every partition, group `audit` at 10 (caught up) on partition 0."""
    rig = Rig()
    rig.kafka.create_topic("orders", 3, 1)
    base = to_millis(T0) - 60_000
    for p in range(3):
        rig.kafka.produce("orders", p, timestamps_ms=[base + 1000 * i for i in range(10)])
    rig.kafka.commit("billing", {("orders", p): 4 for p in range(3)})
    rig.kafka.commit("audit", {("orders", 0): 10})
    return rig


def test_a_cycle_where_nothing_moved_sends_no_group_offset_and_reads_nothing() -> None:
    rig = _rig()
    first_run = rig.cycle()
    first = rig.batch()
    run = rig.cycle()
    second = rig.batch()

    assert first.carried is None, "nothing was written before: every sample is sent"
    assert first_run.counts["group_partitions_moved"] == 4
    assert second.carried is not None and second.carried.since == first.sampled_at
    assert (second.carried.moved, second.carried.gone) == ([], [])
    assert run.counts["group_partitions_moved"] == 0 and run.counts["timestamps_needed"] == 0
    assert run.counts["group_partitions"] == 4 and run.counts["exact"] == 3
    assert set(second.group_offsets) == set(first.group_offsets), "the samples are the previous ones"
    assert {p.offsets for p in second.partitions} == {p.offsets for p in first.partitions}


def test_a_commit_or_a_new_record_moves_only_the_group_partitions_on_it() -> None:
    rig = _rig()
    rig.cycle()
    rig.kafka.commit("billing", {("orders", 1): 6})
    rig.kafka.produce("orders", 2, timestamps_ms=[to_millis(T0)])

    run = rig.cycle()

    batch = rig.batch()
    assert batch.carried is not None
    moved = {(s.committed.group_id, s.committed.partition): s for s in batch.carried.moved}
    assert set(moved) == {("billing", 1), ("billing", 2)}
    assert run.counts["group_partitions_moved"] == 2
    assert (moved[("billing", 1)].lag, moved[("billing", 1)].timestamp_method) == (4, METHOD_EXACT)
    assert moved[("billing", 1)].committed_timestamp_ms == to_millis(T0) - 60_000 + 6000
    assert moved[("billing", 2)].lag == 7 and moved[("billing", 2)].end_offset == 11
    lags = rig.lags()
    assert len(lags) == 4 and lags[("billing", "orders", 0)].lag == 6
    partitions = rig.partitions()
    assert partitions[("orders", 2)].latest_timestamp_ms == to_millis(T0)


def test_a_group_gone_is_named_so_its_rows_are_not_carried() -> None:
    rig = _rig()
    rig.cycle()
    rig.kafka.delete_group("audit")

    rig.cycle()

    batch = rig.batch()
    assert batch.carried is not None and batch.carried.gone == [("audit", "orders", 0)]
    assert ("audit", "orders", 0) not in rig.lags()
    rig.cycle()
    assert rig.batch().carried is not None and rig.batch().carried.gone == []


def test_an_append_time_not_read_is_tried_again_while_the_offsets_stand_still() -> None:
    rig = _rig()
    rig.kafka.reader_capacity = 0
    rig.cycle()
    assert rig.lags()[("billing", "orders", 0)].timestamp_method == METHOD_NONE
    rig.kafka.reader_capacity = 1_000

    run = rig.cycle()

    assert run.counts["group_partitions_moved"] == 4
    assert run.counts["exact"] == 3
    assert rig.lags()[("billing", "orders", 0)].timestamp_method == METHOD_EXACT


def test_after_a_batch_that_was_not_written_every_sample_is_sent() -> None:
    rig = _rig()
    rig.writer.written = False  # PostgreSQL is down: the batch is queued
    rig.cycle()
    rig.writer.written = True

    rig.cycle()

    assert rig.batch().carried is None, "the previous rows are not in the store to carry"
    rig.cycle()
    assert rig.batch().carried is not None


def test_the_first_cycle_answers_the_lag_first_and_asks_for_the_next_at_once() -> None:
    rig = _rig()
    asked: list[str] = []
    rig.context.run_soon = asked.append

    first = rig.cycle()

    assert asked == ["offsets"]
    assert first.counts["timestamps_read"] == 0
    assert first.counts["filling"] == first.counts["timestamps_needed"] > 0
    lags = rig.lags()
    assert {key: s.lag for key, s in lags.items()} == {
        ("billing", "orders", 0): 6,
        ("billing", "orders", 1): 6,
        ("billing", "orders", 2): 6,
        ("audit", "orders", 0): 0,
    }
    assert lags[("billing", "orders", 0)].timestamp_method == METHOD_NONE

    second = rig.cycle()

    assert second.counts["filling"] == 0 and second.counts["exact"] == 3
    assert asked == ["offsets"], "filled: the next cycle comes at its interval"
    assert rig.lags()[("billing", "orders", 0)].committed_timestamp_ms == to_millis(T0) - 60_000 + 4000


def test_append_times_the_budget_leaves_after_a_start_are_still_filling() -> None:
    rig = _rig()
    asked: list[str] = []
    rig.context.run_soon = asked.append
    rig.cycle()
    rig.kafka.reader_capacity = 0

    second = rig.cycle()

    assert second.counts["filling"] == second.counts["timestamps_unread"] > 0
    assert asked == ["offsets", "offsets"]
    rig.kafka.reader_capacity = 1_000
    assert rig.cycle().counts["filling"] == 0
    rig.kafka.reader_capacity = 0
    rig.kafka.produce("orders", 1, timestamps_ms=[to_millis(T0)])
    later = rig.cycle()
    assert later.counts["timestamps_unread"] > 0 and later.counts["filling"] == 0, (
        "once filled, what the budget leaves is interpolated, not filling"
    )
    assert asked == ["offsets", "offsets"]


def test_the_run_counts_the_group_offsets_sent() -> None:
    rig = _rig()
    assert rig.cycle().counts["group_offsets_sent"] == 4
    rig.kafka.commit("billing", {("orders", 1): 6})
    assert rig.cycle().counts["group_offsets_sent"] == 1


def test_the_first_cycle_writes_its_history_rows_after_the_answer_and_before_the_next_batch() -> None:
    rig = _rig()
    rig.context.run_soon = lambda job: True

    first = rig.cycle()
    cold = rig.batch()
    second = rig.cycle()

    assert cold.history_after and cold.carried is None
    assert first.counts["history_after"] == 4 and second.counts["history_after"] == 0
    labels = [label for label, _ in rig.writer.writes if "offsets" in label]
    assert labels == ["prod:offsets", "prod:offsets history", "prod:offsets"], "in this order"
    history = next(
        cell.cell_contents
        for _, write in rig.writer.writes
        for cell in write.__closure__ or ()
        if isinstance(cell.cell_contents, OffsetsHistory)
    )
    assert (history.cluster, history.sampled_at, history.rows) == ("prod", cold.sampled_at, 4)
    batch = rig.batch()
    assert not batch.history_after
    assert batch.carried is not None and batch.carried.since == cold.sampled_at


def test_a_later_cycle_or_one_that_cannot_ask_for_the_next_writes_its_history_with_it() -> None:
    rig = _rig()  # no run_soon: the first cycle is not a cold one

    first = rig.cycle()

    assert not rig.batch().history_after and first.counts["history_after"] == 0
    assert [label for label, _ in rig.writer.writes if "offsets" in label] == ["prod:offsets"]

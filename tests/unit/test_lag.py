"""Lag arithmetic of one cycle, against hand-computed values."""

from __future__ import annotations

from monitor.collect.lag import (
    group_samples,
    group_targets,
    observe_commits,
    partition_samples,
    partition_targets,
)
from monitor.core.records import (
    METHOD_EXACT,
    METHOD_INTERPOLATED,
    METHOD_NONE,
    CommittedOffset,
    PartitionOffsets,
    RecordTimestamp,
)

T = "orders"
OFFSETS = {
    (T, 0): PartitionOffsets(T, 0, start=100, end=200),
    (T, 1): PartitionOffsets(T, 1, start=0, end=0),  # empty
    (T, 2): PartitionOffsets(T, 2, start=50, end=60),
}


def ts(
    partition: int, offset: int, ms: int, record_offset: int | None = None
) -> tuple[tuple[str, int, int], RecordTimestamp]:
    record = offset if record_offset is None else record_offset
    return (T, partition, offset), RecordTimestamp(T, partition, offset, record, ms, "CreateTime")


def test_targets() -> None:
    assert partition_targets(OFFSETS.values()) == {(T, 0, 100), (T, 0, 199), (T, 2, 50), (T, 2, 59)}
    committed = [
        CommittedOffset("g", T, 0, 150),  # lagging: 150 and 149
        CommittedOffset("g", T, 2, 60),  # caught up: nothing more
        CommittedOffset("h", T, 0, 20),  # fell off the log: the oldest unconsumed is start (100)
        CommittedOffset("h", T, 2, 50),  # lagging at start: no committed-1 (deleted)
        CommittedOffset("x", "unknown", 0, 5),
    ]
    assert group_targets(committed, OFFSETS) == {(T, 0, 150), (T, 0, 149), (T, 0, 100), (T, 2, 50)}


def test_exact_lag_and_data_loss() -> None:
    timestamps = dict(
        [ts(0, 150, 1_000), ts(0, 149, 990), ts(0, 100, 500), ts(0, 199, 2_000), ts(2, 59, 3_000)]
    )
    committed = [
        CommittedOffset("g", T, 0, 150),
        CommittedOffset("g", T, 2, 60),
        CommittedOffset("h", T, 0, 20),
        CommittedOffset("k", T, 2, 65),  # ahead of a stale end: clamped
    ]
    samples, losses = group_samples(committed, OFFSETS, timestamps, {}, now_ms=9_000)
    by_group = {(s.committed.group_id, s.committed.partition): s for s in samples}

    g0 = by_group["g", 0]
    assert (g0.lag, g0.committed_timestamp_ms, g0.consumed_timestamp_ms, g0.timestamp_method) == (
        50,
        1_000,
        990,
        METHOD_EXACT,
    )
    g2 = by_group["g", 2]
    assert (g2.lag, g2.committed_timestamp_ms, g2.consumed_timestamp_ms, g2.timestamp_method) == (
        0,
        None,
        3_000,
        METHOD_EXACT,
    )
    h0 = by_group["h", 0]
    assert (h0.lag, h0.committed_timestamp_ms, h0.consumed_timestamp_ms) == (180, 500, None)
    k2 = by_group["k", 2]
    assert (k2.lag, k2.lag_clamped) == (0, True)
    assert len(losses) == 1 and losses[0].group_id == "h"
    assert (losses[0].committed_offset, losses[0].start_offset, losses[0].messages_lost) == (20, 100, 80)


def test_interpolated_fallback_states_its_method_and_error() -> None:
    history = {(T, 0): [(100, 0), (160, 6_000), (200, 10_000)]}
    samples, _ = group_samples([CommittedOffset("g", T, 0, 150)], OFFSETS, {}, history, now_ms=20_000)
    (s,) = samples
    assert s.timestamp_method == METHOD_INTERPOLATED
    assert s.committed_timestamp_ms == 5_100 and s.timestamp_error_ms == 5_100
    assert s.consumed_timestamp_ms == 5_000


def test_no_timestamp_and_no_history() -> None:
    samples, _ = group_samples([CommittedOffset("g", T, 0, 150)], OFFSETS, {}, {}, now_ms=1)
    assert samples[0].timestamp_method == METHOD_NONE and samples[0].committed_timestamp_ms is None
    assert samples[0].lag == 50


def test_compacted_gap_uses_the_next_record() -> None:
    # the record at 150 was compacted away; the reader answered with the next record, 153
    timestamps = dict([ts(0, 150, 1_234, record_offset=153)])
    samples, _ = group_samples([CommittedOffset("g", T, 0, 150)], OFFSETS, timestamps, {}, now_ms=1)
    assert samples[0].committed_timestamp_ms == 1_234


def test_partition_samples() -> None:
    timestamps = dict([ts(0, 100, 500), ts(0, 199, 2_000)])
    samples = {s.offsets.partition: s for s in partition_samples(OFFSETS.values(), timestamps)}
    assert (samples[0].start_timestamp_ms, samples[0].latest_timestamp_ms, samples[0].timestamp_type) == (
        500,
        2_000,
        "CreateTime",
    )
    assert (samples[1].start_timestamp_ms, samples[1].latest_timestamp_ms) == (None, None)
    assert samples[2].latest_timestamp_ms is None


def test_commit_observations() -> None:
    previous = {("g", T, 0): 140, ("g", T, 2): 60, ("r", T, 0): 180}
    committed = [
        CommittedOffset("g", T, 0, 150),  # moved forward
        CommittedOffset("g", T, 2, 60),  # unchanged
        CommittedOffset("r", T, 0, 120),  # rewound
        CommittedOffset("new", T, 0, 10),  # first sighting: commit time unknown
    ]
    seen = observe_commits(previous, committed, now_ms=7)
    assert [(o.group_id, o.previous_offset, o.committed_offset) for o in seen] == [
        ("g", 140, 150),
        ("r", 180, 120),
    ]

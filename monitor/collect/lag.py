"""Pure functions of one offsets cycle: which record timestamps to read, and the group samples,
data-loss events and commit observations that follow from what was read.

Definitions (DOMAIN.md): offset lag = max(end - committed, 0), clamped and counted when a
committed offset is ahead of a stale end offset; the oldest unconsumed message is the record at
`committed` (or at `start` when the group fell off the log); the last consumed one is at
`committed - 1`; committed < start is a data loss.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from monitor.collect.interpolate import estimate_append_time
from monitor.core.records import (
    END_OFFSET_LAST_KNOWN,
    END_OFFSET_LISTED,
    METHOD_EXACT,
    METHOD_INTERPOLATED,
    METHOD_NONE,
    CommitObservation,
    CommittedOffset,
    DataLossEvent,
    EndOffsetHeldBack,
    GroupOffsetSample,
    PartitionOffsets,
    PartitionSample,
    RecordTimestamp,
    TopicPartition,
)
from monitor.kafka.protocol import Target as Target  # the records whose append times a cycle reads

GroupKey = tuple[str, str, int]
"""(group, topic, partition)."""


@dataclass(frozen=True, slots=True)
class KnownEnd:
    """The last end offset listed for a partition, its start offset then, and when it was listed."""

    start: int
    end: int
    listed_at_ms: int


def last_known_ends(
    held_back: Mapping[TopicPartition, EndOffsetHeldBack], known: Mapping[TopicPartition, KnownEnd]
) -> tuple[dict[TopicPartition, PartitionOffsets], dict[TopicPartition, KnownEnd], list[TopicPartition]]:
    """Offsets for the partitions whose leader could not give an end offset: the last end offset
    known stands in (consumers cannot read past a held-back high watermark, so lag against it
    stays meaningful), with the start offset the leader gave now where it gave one.

    Returns (their offsets, the known ends used, the held-back partitions with no end known).
    """
    offsets: dict[TopicPartition, PartitionOffsets] = {}
    used: dict[TopicPartition, KnownEnd] = {}
    unknown: list[TopicPartition] = []
    for key, held in sorted(held_back.items()):
        last = known.get(key)
        if last is None:
            unknown.append(key)
            continue
        start = held.start if held.start is not None else last.start
        offsets[key] = PartitionOffsets(held.topic, held.partition, min(start, last.end), last.end)
        used[key] = last
    return offsets, used, unknown


def partition_targets(offsets: Iterable[PartitionOffsets]) -> set[Target]:
    """The oldest and newest record of every non-empty partition (time coverage, append lag)."""
    targets: set[Target] = set()
    for po in offsets:
        if po.end > po.start:
            targets.add((po.topic, po.partition, po.start))
            targets.add((po.topic, po.partition, po.end - 1))
    return targets


def group_targets(
    committed: Iterable[CommittedOffset], offsets: Mapping[TopicPartition, PartitionOffsets]
) -> set[Target]:
    """For each lagging group-partition: the oldest unconsumed and the last consumed record.

    Caught-up groups need nothing more: their last consumed record is the partition's newest,
    which `partition_targets` already asks for.
    """
    targets: set[Target] = set()
    for c in committed:
        po = offsets.get((c.topic, c.partition))
        if po is None or c.offset >= po.end:
            continue
        oldest_unconsumed = max(c.offset, po.start)
        targets.add((c.topic, c.partition, oldest_unconsumed))
        if c.offset - 1 >= po.start:
            targets.add((c.topic, c.partition, c.offset - 1))
    return targets


def unmoved_groups(
    committed: Iterable[CommittedOffset],
    offsets: Mapping[TopicPartition, PartitionOffsets],
    previous: Mapping[GroupKey, GroupOffsetSample],
) -> tuple[list[GroupOffsetSample], list[CommittedOffset]]:
    """(the previous samples that still hold, the committed offsets to sample anew).

    A previous sample holds when neither its committed offset nor its partition's start and end
    offsets moved, and its append times were exact (the last consumed record's too, where there
    is one): an estimate, or a time not read, is worked out again (the record may be readable
    now). A group behind the start offset is sampled anew every cycle, so that its data loss is
    seen in every cycle.
    """
    kept: list[GroupOffsetSample] = []
    moved: list[CommittedOffset] = []
    for c in committed:
        before = previous.get((c.group_id, c.topic, c.partition))
        po = offsets.get((c.topic, c.partition))
        if (
            before is not None
            and po is not None
            and (before.committed is c or before.committed == c)  # the same record, from the stream
            and before.end_offset == po.end
            and before.start_offset == po.start
            and before.timestamp_method == METHOD_EXACT
            and (before.consumed_timestamp_ms is not None or c.offset <= po.start)
            and c.offset >= po.start
        ):
            kept.append(before)
        else:
            moved.append(c)
    return kept, moved


def unmoved_partitions(
    offsets: Iterable[PartitionOffsets],
    previous: Mapping[TopicPartition, PartitionSample],
    held_back: Collection[TopicPartition],
) -> tuple[list[PartitionSample], list[PartitionOffsets]]:
    """(the previous partition samples that still hold, the partitions to sample anew): a sample
    holds when the partition's offsets did not move, its end offset was listed then and now, and
    the append times of its oldest and newest records were read; a partition `held_back` now is
    sampled anew."""
    kept: list[PartitionSample] = []
    moved: list[PartitionOffsets] = []
    for po in offsets:
        before = previous.get((po.topic, po.partition))
        if (
            before is not None
            and before.offsets == po
            and before.end_offset_method == END_OFFSET_LISTED
            and (po.topic, po.partition) not in held_back
            and (
                po.end <= po.start
                or (before.start_timestamp_ms is not None and before.latest_timestamp_ms is not None)
            )
        ):
            kept.append(before)
        else:
            moved.append(po)
    return kept, moved


def key(sample: GroupOffsetSample) -> GroupKey:
    """(group, topic, partition) of a group sample."""
    c = sample.committed
    return (c.group_id, c.topic, c.partition)


def gone_keys(
    previous: Mapping[GroupKey, GroupOffsetSample],
    kept: list[GroupOffsetSample],
    sampled_now: list[GroupOffsetSample],
) -> list[GroupKey]:
    """The keys of the previous samples that this cycle has no sample of (a group deleted, or
    its offsets expired). The kept samples are previous ones: when they and the previous keys
    sampled anew add up to all the previous keys, none went, and no set of keys is built."""
    moved_before = sum(1 for s in sampled_now if key(s) in previous)
    if len(kept) + moved_before == len(previous):
        return []
    current = {key(s) for s in sampled_now}
    current.update(key(s) for s in kept)
    return [key for key in previous if key not in current]


def gone_for_good(
    gone: Iterable[GroupKey], listed: Collection[str] | None, answered: Collection[str]
) -> list[GroupKey]:
    """Of the keys a cycle no longer samples (`gone_keys`), those the cluster no longer has: their
    group is missing from a complete listing of the groups (`listed`; None when the listing
    failed), or its committed offsets came back without them (`answered`: the groups whose
    committed offsets this cycle has). The others are only unsampled (a coordinator that did not
    answer): what was found on them keeps its state."""
    return [key for key in gone if (listed is not None and key[0] not in listed) or key[0] in answered]


def moved_targets(
    moved: Iterable[CommittedOffset],
    moved_partitions: Iterable[PartitionOffsets],
    offsets: Mapping[TopicPartition, PartitionOffsets],
) -> set[Target]:
    """The records whose append times the moved samples need: the oldest and newest of each
    moved partition and of each partition a moved group-partition is on (a caught-up group's last
    consumed record is the newest), and the records around each moved lagging group's offset."""
    partitions = {(c.topic, c.partition) for c in moved}
    wanted = list(moved_partitions)
    wanted += [offsets[key] for key in partitions if key in offsets]
    return partition_targets(wanted) | group_targets(moved, offsets)


def _exact(timestamps: Mapping[Target, RecordTimestamp], target: Target) -> int | None:
    found = timestamps.get(target)
    return found.timestamp_ms if found is not None and found.record_offset is not None else None


def partition_samples(
    offsets: Iterable[PartitionOffsets],
    timestamps: Mapping[Target, RecordTimestamp],
    last_known: Mapping[TopicPartition, KnownEnd] | None = None,
) -> list[PartitionSample]:
    """One sample per partition; those in `last_known` say their end offset is the last known."""
    last_known = last_known or {}
    samples = []
    for po in offsets:
        start_ts = latest_ts = None
        ts_type = None
        if po.end > po.start:
            start = timestamps.get((po.topic, po.partition, po.start))
            latest = timestamps.get((po.topic, po.partition, po.end - 1))
            start_ts = start.timestamp_ms if start is not None and start.record_offset is not None else None
            latest_ts = (
                latest.timestamp_ms if latest is not None and latest.record_offset is not None else None
            )
            known = latest if latest is not None and latest.record_offset is not None else start
            ts_type = known.timestamp_type if known is not None and known.record_offset is not None else None
        stand_in = last_known.get((po.topic, po.partition))
        if stand_in is None:
            samples.append(PartitionSample(po, start_ts, latest_ts, ts_type))
        else:
            samples.append(
                PartitionSample(
                    po, start_ts, latest_ts, ts_type, END_OFFSET_LAST_KNOWN, stand_in.listed_at_ms
                )
            )
    return samples


def group_samples(
    committed: Sequence[CommittedOffset],
    offsets: Mapping[TopicPartition, PartitionOffsets],
    timestamps: Mapping[Target, RecordTimestamp],
    histories: Mapping[TopicPartition, Sequence[tuple[int, int]]],
    now_ms: int,
) -> tuple[list[GroupOffsetSample], list[DataLossEvent]]:
    """One sample per committed offset, and a data-loss event where committed < start.

    Append times come from the records themselves where they were read (METHOD_EXACT), else from
    the end-offset history (METHOD_INTERPOLATED, with its error bound), else METHOD_NONE.
    """
    samples: list[GroupOffsetSample] = []
    losses: list[DataLossEvent] = []
    for c in committed:
        po = offsets.get((c.topic, c.partition))
        if po is None:
            samples.append(GroupOffsetSample(c, None, None, None))
            continue
        lag = max(po.end - c.offset, 0)
        clamped = c.offset > po.end
        if c.offset < po.start:
            losses.append(DataLossEvent(c.group_id, c.topic, c.partition, c.offset, po.start, now_ms))
        if lag == 0:
            consumed = _exact(timestamps, (c.topic, c.partition, po.end - 1)) if po.end > po.start else None
            method = METHOD_EXACT if consumed is not None else METHOD_NONE
            samples.append(GroupOffsetSample(c, po.end, po.start, 0, clamped, None, consumed, method))
            continue
        oldest = max(c.offset, po.start)
        committed_ts = _exact(timestamps, (c.topic, c.partition, oldest))
        consumed_ts = (
            _exact(timestamps, (c.topic, c.partition, c.offset - 1)) if c.offset > po.start else None
        )
        method, error = METHOD_EXACT, None
        if committed_ts is None:
            # No history (a cold cycle has none for any partition): nothing to interpolate.
            history = histories.get((c.topic, c.partition))
            estimate = estimate_append_time(history, oldest) if history else None
            if estimate is not None:
                committed_ts, method, error = estimate.timestamp_ms, METHOD_INTERPOLATED, estimate.error_ms
            else:
                method = METHOD_NONE
            if history and consumed_ts is None and c.offset > po.start:
                previous = estimate_append_time(history, c.offset - 1)
                consumed_ts = previous.timestamp_ms if previous is not None else None
        samples.append(
            GroupOffsetSample(c, po.end, po.start, lag, clamped, committed_ts, consumed_ts, method, error)
        )
    return samples, losses


def observe_commits(
    previous: Mapping[GroupKey, int], committed: Iterable[CommittedOffset], now_ms: int
) -> list[CommitObservation]:
    """Commits seen to change since the previous sample (forwards or, for a rewind, backwards).

    A group-partition seen for the first time gives no observation: when it committed is unknown.
    """
    observations = []
    for c in committed:
        before = previous.get((c.group_id, c.topic, c.partition))
        if before is not None and before != c.offset:
            observations.append(CommitObservation(c.group_id, c.topic, c.partition, c.offset, before, now_ms))
    return observations

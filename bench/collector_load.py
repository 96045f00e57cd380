"""The offsets collector benchmark's load (bench/collector.py): the planned topics and groups, the
topics created and filled with records of known timestamps, the groups' commits, and the churn
between cycles (a handful of groups commit, a few partitions get records)."""

from __future__ import annotations

import random
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

PARTITIONS_PER_TOPIC = 100
RECORDS_PER_PARTITION = (5, 20)
PARTITIONS_PER_GROUP = (20, 200)
CHURN_GROUPS = 10
CHURN_PARTITIONS_PER_GROUP = 20
CHURN_PRODUCE_PARTITIONS = 50
CHURN_RECORDS = 3
VALUE = b"v" * 100

TP = tuple[str, int]
T = TypeVar("T")

_TRANSIENT = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._WAIT_COORD,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)

_UNKNOWN_YET = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError._MSG_TIMED_OUT,
    }
)


def note(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _chunks(items: list[T], size: int) -> Iterator[list[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ---------------------------------------------------------------------------------------------
# The workload


@dataclass
class Workload:
    """What the setup wrote, so the results can be checked: record counts and committed offsets."""

    size: int
    topics: list[str]
    base_ms: int
    records: dict[TP, int] = field(default_factory=dict)
    commits: dict[str, dict[TP, int]] = field(default_factory=dict)

    @property
    def partitions(self) -> list[TP]:
        return list(self.records)


def plan_workload(size: int, groups: int, rng: random.Random, per_group: int | None = None) -> Workload:
    """`groups` groups, each committing on `per_group` partitions (None: a random 20-200)."""
    topics = [f"bench-{n:03d}" for n in range(size // PARTITIONS_PER_TOPIC)]
    base_ms = (int(time.time()) - 3600) * 1000
    workload = Workload(size, topics, base_ms)
    for topic in topics:
        for partition in range(PARTITIONS_PER_TOPIC):
            workload.records[(topic, partition)] = rng.randint(*RECORDS_PER_PARTITION)
    partitions = workload.partitions
    high = min(PARTITIONS_PER_GROUP[1], len(partitions))
    low = min(PARTITIONS_PER_GROUP[0], high)
    for g in range(groups):
        count = min(per_group, len(partitions)) if per_group is not None else rng.randint(low, high)
        chosen = rng.sample(partitions, count)
        offsets = {}
        for tp in chosen:
            end = workload.records[tp]
            offsets[tp] = end if rng.random() < 0.5 else rng.randrange(0, end)
        workload.commits[f"bench-group-{g:04d}"] = offsets
    return workload


def create_topics(bootstrap: str, topics: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for n, chunk in enumerate(_chunks(topics, 20)):
        new = [NewTopic(t, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1) for t in chunk]
        futures = admin.create_topics(new, operation_timeout=120, request_timeout=180)
        for future in futures.values():
            future.result(timeout=240)
        note(f"  topics {min((n + 1) * 20, len(topics))}/{len(topics)}")
    # Every broker's metadata cache, not just one: they apply the controller's log each at its own
    # pace, and a client asking a broker that lags is told the topic does not exist.
    deadline = time.monotonic() + 300
    for server in bootstrap.split(","):
        while True:
            missing = _partitions_without_leader(server, topics)
            if not missing:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{missing} partitions still have no leader on {server} after 300 s")
            note(f"  waiting for leaders: {missing} partitions without one on {server}")
            time.sleep(2)
    # A leader in the metadata may not have created the partition's log yet (a broker creates
    # thousands one by one): ListOffsets answers only once it has.
    while True:
        unready = _partitions_not_ready(bootstrap, topics)
        if not unready:
            return
        if time.monotonic() > deadline + 300:
            raise RuntimeError(f"{unready} partitions still not ready after 600 s")
        note(f"  waiting for the brokers to create the logs: {unready} partitions not ready yet")
        time.sleep(3)


def _partitions_not_ready(bootstrap: str, topics: list[str]) -> int:
    """Partitions whose latest offset cannot be listed yet. A new client each time: one that was
    told a topic is unknown keeps failing its partitions for a while after it exists."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wanted = {TopicPartition(t, p): OffsetSpec.latest() for t in topics for p in range(PARTITIONS_PER_TOPIC)}
    futures = admin.list_offsets(wanted, request_timeout=60)
    unready = 0
    for future in futures.values():
        try:
            if future.result(timeout=90).offset < 0:
                unready += 1
        except Exception:
            unready += 1
    return unready


def _partitions_without_leader(server: str, topics: list[str]) -> int:
    """Partitions of `topics` without a leader in the metadata of the broker at `server` (a new
    client bootstrapped from it alone sends its first request there)."""
    metadata = AdminClient({"bootstrap.servers": server}).list_topics(timeout=30)
    missing = 0
    for topic in topics:
        found = metadata.topics.get(topic)
        if found is None or found.error is not None or len(found.partitions) != PARTITIONS_PER_TOPIC:
            missing += PARTITIONS_PER_TOPIC
        else:
            missing += sum(1 for p in found.partitions.values() if p.leader < 0)
    return missing


def produce(bootstrap: str, workload: Workload, plan: Iterable[tuple[TP, int, int]]) -> int:
    """Produce, for each (partition, first index, count), records first..first+count-1 stamped
    base + index seconds, in order; returns how many were produced.

    A partition whose records all failed because the producer did not know it yet (a broker's
    metadata lagging behind the controller's right after the topics were made) is produced again;
    a partition with some records written and some failed would break the offset -> timestamp
    mapping the check relies on, and stops the benchmark.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            # Without idempotence, a retried batch whose first attempt was written after all
            # (a timeout on a loaded broker) is written twice, or after a later batch: the
            # records' offsets then no longer give their timestamps, and the check fails on rows
            # the collector got right.
            "enable.idempotence": True,
            "linger.ms": 50,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "log_level": 3,  # not a warning per partition missing from the metadata cache
        }
    )
    pending = list(plan)
    sent = 0
    ok: dict[TP, int] = defaultdict(int)
    failed: dict[TP, KafkaError] = {}

    def delivered(error: KafkaError | None, message: Any) -> None:
        key = (str(message.topic()), int(message.partition()))
        if error is None:
            ok[key] += 1
        else:
            failed[key] = error

    for attempt in range(6):
        ok.clear()
        failed.clear()
        for (topic, partition), first, count in pending:
            for index in range(first, first + count):
                try:
                    _produce_one(producer, workload, topic, partition, index, delivered)
                except KafkaException as exc:
                    failed[(topic, partition)] = exc.args[0]  # a topic the producer thinks missing
                    break
                sent += 1
                if sent % 20_000 == 0:
                    producer.poll(0)
                    note(f"  produced {sent:,} records")
        left = producer.flush(300)
        if left:
            raise RuntimeError(f"producing failed: {left} records undelivered after 300 s")
        if not failed:
            return sent
        broken = {tp: e for tp, e in failed.items() if ok[tp] or e.code() not in _UNKNOWN_YET}
        if broken:
            raise RuntimeError(f"producing failed on {len(broken)} partitions: {list(broken.items())[:3]}")
        pending = [item for item in pending if item[0] in failed]
        sent -= sum(ok[tp] for tp, _, _ in pending)  # none: a partition with any is `broken`
        note(f"  {len(pending)} partitions were not known to the producer yet; producing them again")
        time.sleep(2 * (attempt + 1))
    raise RuntimeError(f"{len(pending)} partitions stayed unknown to the producer")


def _produce_one(
    producer: Producer,
    workload: Workload,
    topic: str,
    partition: int,
    index: int,
    delivered: Callable[[KafkaError | None, Any], None],
) -> None:
    while True:
        try:
            producer.produce(
                topic,
                value=VALUE,
                key=f"key-{topic}-{partition}-{index}".encode(),
                partition=partition,
                timestamp=workload.base_ms + index * 1000,
                on_delivery=delivered,
            )
            return
        except BufferError:
            producer.poll(0.1)


def _commit(bootstrap: str, group: str, offsets: dict[TP, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        wanted = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        deadline = time.monotonic() + 120
        while True:
            error: KafkaError | None
            try:
                answer = consumer.commit(offsets=wanted, asynchronous=False) or []
                failed = [tp.error for tp in answer if tp.error is not None]
                if not failed:
                    return
                error = failed[0]
            except KafkaException as exc:
                error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
                if error is None:
                    raise
            if not (error.code() in _TRANSIENT or error.retriable()) or time.monotonic() > deadline:
                raise RuntimeError(f"commit of group {group} failed: {error}")
            time.sleep(0.2)
    finally:
        consumer.close()


def commit_groups(bootstrap: str, commits: dict[str, dict[TP, int]], threads: int) -> None:
    """Commit every group's offsets, one consumer per group, `threads` groups at a time."""
    done = 0
    with ThreadPoolExecutor(max_workers=threads) as pool:
        futures = [pool.submit(_commit, bootstrap, group, offsets) for group, offsets in commits.items()]
        for future in as_completed(futures):
            future.result()
            done += 1
            if done % 50 == 0 or done == len(futures):
                note(f"  committed {done}/{len(futures)} groups")


def churn(bootstrap: str, workload: Workload, rng: random.Random, threads: int) -> dict[str, int]:
    """New records on a few partitions, then a handful of groups committing further on."""
    chosen = rng.sample(workload.partitions, min(CHURN_PRODUCE_PARTITIONS, len(workload.records)))
    plan = [(tp, workload.records[tp], CHURN_RECORDS) for tp in chosen]
    produced = produce(bootstrap, workload, plan)
    for tp in chosen:
        workload.records[tp] += CHURN_RECORDS
    moved: dict[str, dict[TP, int]] = {}
    for group in rng.sample(sorted(workload.commits), min(CHURN_GROUPS, len(workload.commits))):
        current = workload.commits[group]
        keys = rng.sample(sorted(current), min(CHURN_PARTITIONS_PER_GROUP, len(current)))
        moved[group] = {tp: rng.randint(current[tp], workload.records[tp]) for tp in keys}
        current.update(moved[group])
    commit_groups(bootstrap, moved, threads)
    return {"records": produced, "groups": len(moved), "group_partitions": sum(map(len, moved.values()))}


# ---------------------------------------------------------------------------------------------
# The measuring process: the collector and nothing else

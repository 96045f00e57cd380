"""The Spark expressions of the sliding-window status give what the pure functions of status.py
give: on every numbered case and window of test_transforms_status.py, and on random windows."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from monitor.evaluate.transforms.status import Commit, partition_status
from monitor.evaluate.transforms.status_columns import with_status
from tests.fixtures.status_cases import CASES, WINDOWS, window

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
SCHEMA = "id int, entries array<struct<time_ms: bigint, offset: bigint, lag: bigint>>, last_ms bigint"
Sample = tuple[list[Commit], int | None]


def spark_statuses(spark: SparkSession, samples: list[Sample], now_ms: int, size: int) -> list[str | None]:
    from pyspark.sql import functions as F

    rows = [
        (n, [(c.time_ms, c.offset, c.lag) for c in commits], last_ms)
        for n, (commits, last_ms) in enumerate(samples)
    ]
    frame = spark.createDataFrame(rows, SCHEMA)
    at = EPOCH + timedelta(milliseconds=now_ms)
    result = with_status(frame, "entries", F.col("last_ms"), at, size).select("id", "status").collect()
    assert set(frame.columns) | {"status"} == set(
        with_status(frame, "entries", F.col("last_ms"), at, size).columns
    )
    by_id = {row["id"]: row["status"] for row in result}
    return [by_id[n] for n in range(len(samples))]


def test_numbered_cases(spark: SparkSession) -> None:
    # One Spark job for every case (each job costs seconds): the cases are moved in time to one
    # evaluation time, which the verdicts do not depend on (the pure function says the same).
    now = max(c.now for c in CASES)
    samples: list[Sample] = [
        ([replace(e, time_ms=e.time_ms + (now - c.now) * 1000) for e in window(*c.entries)], None)
        for c in CASES
    ]
    expected = [partition_status(commits, None, now * 1000) for commits, _ in samples]
    assert expected == [c.expected.final for c in CASES]
    found = spark_statuses(spark, samples, now * 1000, 10)
    assert dict(zip([c.name for c in CASES], found, strict=True)) == {
        c.name: status for c, status in zip(CASES, expected, strict=True)
    }


@pytest.mark.parametrize("size", [1, 2, 10])
def test_windows_from_samples(spark: SparkSession, size: int) -> None:
    now_ms = 10_000_000
    samples: list[Sample] = [
        (window(*entries), None if last_s is None else last_s * 1000) for _, entries, last_s, _, _ in WINDOWS
    ]
    expected = [partition_status(commits, last_ms, now_ms, size) for commits, last_ms in samples]
    assert spark_statuses(spark, samples, now_ms, size) == expected


def _random_samples(rng: random.Random) -> Sample:
    """A group-partition's samples in any order: distinct times, offsets that mostly move forwards
    (sometimes stand still, sometimes rewind), lags often 0, an observed commit before, inside or
    after the window, or none."""
    count = rng.randint(1, 12)
    times = sorted(rng.sample(range(0, 1_200), count))
    offset, end = rng.randint(0, 1_000), 0
    commits = []
    for time in times:
        move = rng.random()
        if move < 0.4:
            offset += rng.randint(1, 50)
        elif move < 0.5:
            offset -= rng.randint(1, 80)
        end = max(end, offset) + rng.choice([0, 0, rng.randint(1, 40)])
        lag = 0 if rng.random() < 0.25 else max(end - offset, 0)
        commits.append(Commit(offset, time * 1000, lag))
    rng.shuffle(commits)
    last = rng.choice([None, -rng.randint(1, 900) * 1000, rng.randint(0, 1_300) * 1000])
    return commits, last


@pytest.mark.parametrize("size", [1, 3, 10])
def test_random_windows(spark: SparkSession, size: int) -> None:
    rng = random.Random(20261122 + size)
    samples = [_random_samples(rng) for _ in range(600)]
    for now_ms in (1_250_000, 3_000_000):
        expected = [partition_status(commits, last_ms, now_ms, size) for commits, last_ms in samples]
        assert len(set(expected)) >= 3  # the cases are varied
        assert spark_statuses(spark, samples, now_ms, size) == expected

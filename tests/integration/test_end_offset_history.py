"""The end-offset history the offsets job reads to interpolate append times
(`monitor.store.history.end_offset_brackets`): for every target the newest sample at or below its
offset and the first after it above, and for every partition the two oldest and the newest of the
window, against the same picked from every sample in Python; targets repeated (two groups at one
offset), many targets of one partition, and a partition whose offsets start again (a topic made
anew: the bracket is the pair next to each other in time, not an older sample above) included."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from monitor.store.history import end_offset_brackets
from monitor.store.ingest import copy_rows
from monitor.store.partitions import ensure_partitions

CLUSTER = "history"
START = datetime(2030, 3, 1, tzinfo=UTC)
COLUMNS = ["cluster", "topic", "partition", "sampled_at", "start_offset", "end_offset", "run_id"]

Sample = tuple[int, datetime]


def _expected(
    samples: dict[tuple[str, int], list[Sample]], targets: list[tuple[str, int, int]], since: datetime
) -> dict[tuple[str, int], list[Sample]]:
    picked: dict[tuple[str, int], set[Sample]] = {}
    for topic, partition, target in targets:
        window = sorted((s for s in samples.get((topic, partition), []) if s[1] >= since), key=lambda s: s[1])
        if not window:
            continue
        chosen = picked.setdefault((topic, partition), set())
        chosen.update(window[:2])
        chosen.add(window[-1])
        below = [s for s in window if s[0] <= target][-1:]
        after = [s for s in window if not below or s[1] > below[0][1]]
        chosen.update(below + [s for s in after if s[0] > target][:1])
    return {key: sorted(chosen, key=lambda s: s[1]) for key, chosen in picked.items()}


def test_the_brackets_are_those_of_every_sample(engine: Engine) -> None:
    rng = random.Random(11)
    samples: dict[tuple[str, int], list[Sample]] = {}
    rows = []
    for topic, partition in [("orders", 0), ("orders", 1), ("payments", 0), ("quiet", 0), ("remade", 0)]:
        end = 0
        at = START
        points = 1 if topic == "quiet" else 120
        for n in range(points):  # three days of samples, irregular, the end offset rising in steps
            at += timedelta(minutes=rng.randrange(1, 70))
            end = 0 if topic == "remade" and n == 80 else end + rng.choice([0, 0, 3, 50, 1000])
            samples.setdefault((topic, partition), []).append((end, at))
            rows.append((CLUSTER, topic, partition, at, 0, end, None))
    with engine.begin() as conn:
        ensure_partitions(conn, START, 6)
        conn.execute(text("DELETE FROM partition_offsets WHERE cluster = :c"), {"c": CLUSTER})
        copy_rows(conn, "partition_offsets", COLUMNS, iter(rows))
    since = START + timedelta(hours=20)
    targets: list[tuple[str, int, int]] = []
    for (topic, partition), points in samples.items():
        offsets = [end for end, _ in points]
        for _ in range(25):  # below the window, inside it, at a sample's offset, past the end
            targets.append(
                (topic, partition, rng.choice([-1, rng.randrange(0, offsets[-1] + 10), rng.choice(offsets)]))
            )
    targets += targets[:10]  # the same target twice
    targets.append(("missing", 0, 5))  # a partition without samples has none
    with engine.connect() as conn:
        found = end_offset_brackets(conn, CLUSTER, targets, since)
    assert found == _expected(samples, targets, since)
    assert ("missing", 0) not in found and len(found[("orders", 0)]) > 3

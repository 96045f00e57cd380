"""The plans and times of the fresh offset lag reads (`monitor.store.fresh_lag`) at a fleet's
size: GROUPS x PARTITIONS group-partitions in `latest_group_offsets`, their commits in
`latest_commits`, the partitions' end offsets in `latest_partition_offsets` and, listed since
(one partition in ten missed), in `refreshed_end_offsets`, the commit stream's mark, and an
evaluation's group, group-topic and group-partition rows. Prints EXPLAIN (ANALYZE, BUFFERS) of
one group's fresh read and of its partition listing (the API's `…/groups/{group}/lag`), and of
the counts of lagging groups (the cluster's, every topic's: one pass over the cluster), each
the median of REPEATS runs.

    python bench/fresh_lag_plan.py postgresql+psycopg://.../scratch [GROUPS] [PARTITIONS]

The database must be migrated and empty of these rows (a scratch database); nothing is written
elsewhere.
"""

from __future__ import annotations

import statistics
import sys
import time
from datetime import UTC, datetime

from sqlalchemy import Connection, text

from monitor.expose.read import lag as read_lag
from monitor.expose.read.fresh import GROUP_COUNT, LAGGING_BY_TOPIC, LAGGING_OF_TOPICS, partition_lags
from monitor.expose.read.queries import ALL
from monitor.store.engine import make_engine
from monitor.store.fresh_lag import FRESH_PARTITIONS
from monitor.store.partitions import ensure_partitions

REPEATS = 20
TOPICS_PAGE = [f"t{t}" for t in range(100)]
"""The topics of a page of the list of topics (`queries.MAX_LIMIT`)."""

AT = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)

FILL = [
    """INSERT INTO latest_partition_offsets (cluster, topic, partition, sampled_at, start_offset, end_offset,
                                             end_offset_method)
       SELECT 'bench', 't' || t, p, :at, 0, 100000, 'listed'
       FROM generate_series(0, :topics - 1) t, generate_series(0, 9) p""",
    """INSERT INTO latest_group_offsets (cluster, group_id, topic, partition, sampled_at, committed_offset,
                                         end_offset, start_offset, lag, lag_clamped, timestamp_method)
       SELECT 'bench', 'g' || g, 't' || ((g * :per + k) / 10 % :topics), (g * :per + k) % 10, :at,
              90000, 100000, 0, 10000, false, 'none'
       FROM generate_series(0, :groups - 1) g, generate_series(0, :per - 1) k""",
    """INSERT INTO latest_commits (cluster, group_id, topic, partition, committed_offset, observed_at)
       SELECT cluster, group_id, topic, partition, 95000, sampled_at + interval '5 seconds'
       FROM latest_group_offsets WHERE cluster = 'bench' AND (hashtext(group_id) + partition) % 2 = 0""",
    """INSERT INTO refreshed_end_offsets (cluster, topic, partition, end_offset, answered_at, missed)
       SELECT cluster, topic, partition, end_offset + 10, sampled_at + interval '2 seconds', partition = 9
       FROM latest_partition_offsets WHERE cluster = 'bench'""",
    """INSERT INTO end_offset_refreshes (cluster, listed_at, partitions, missed)
       SELECT 'bench', :at + interval '9 seconds', count(*), count(*) FILTER (WHERE missed)
       FROM refreshed_end_offsets WHERE cluster = 'bench'""",
    """INSERT INTO commit_stream_marks (cluster, streaming_since, read_until)
       VALUES ('bench', :at - interval '1 minute', :at + interval '9 seconds')""",
    """INSERT INTO derived_cluster (cluster, evaluated_at) VALUES ('bench', :at)""",
    """INSERT INTO derived_group_partition (cluster, group_id, topic, partition, evaluated_at,
                                            committed_offset, end_offset, offset_lag, status)
       SELECT cluster, group_id, topic, partition, :at, committed_offset, end_offset, lag, 'OK'
       FROM latest_group_offsets WHERE cluster = 'bench'""",
    """INSERT INTO derived_group_topic (cluster, group_id, topic, evaluated_at, offset_lag, status)
       SELECT cluster, group_id, topic, :at, sum(offset_lag), 'OK' FROM derived_group_partition
       WHERE cluster = 'bench' GROUP BY cluster, group_id, topic""",
    """INSERT INTO derived_group (cluster, group_id, evaluated_at, offset_lag, status)
       SELECT cluster, group_id, :at, sum(offset_lag), 'OK' FROM derived_group_topic
       WHERE cluster = 'bench' GROUP BY cluster, group_id""",
]


def fill(conn: Connection, groups: int, per_group: int) -> None:
    ensure_partitions(conn, AT, ahead_days=1)
    topics = max(1, groups * per_group // 10 // 10)  # every partition read by about 10 groups
    for statement in FILL:
        conn.execute(text(statement), {"at": AT, "groups": groups, "per": per_group, "topics": topics})
    for table in (
        "latest_partition_offsets",
        "latest_group_offsets",
        "latest_commits",
        "refreshed_end_offsets",
        "derived_group_partition",
        "derived_group_topic",
        "derived_group",
    ):
        conn.execute(text(f"ANALYZE {table}"))


def median_ms(run: object) -> float:
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        run()  # type: ignore[operator]
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    url = sys.argv[1]
    groups = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    per_group = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    engine = make_engine(url)
    with engine.begin() as conn:
        fill(conn, groups, per_group)
    group = f"g{groups // 2}"
    with engine.connect() as conn:
        plan = conn.execute(
            text(f"EXPLAIN (ANALYZE, BUFFERS) {FRESH_PARTITIONS}"), {"c": "bench", "gs": [group]}
        )
        print(
            f"## fresh read of one group of {per_group} partitions, {groups * per_group} group-partitions\n"
        )
        print("\n".join(str(r[0]) for r in plan))
        conn.execute(text("SET plan_cache_mode = force_custom_plan"))
        fresh = median_ms(lambda: partition_lags(conn, "bench", group))
        listing = median_ms(lambda: read_lag.group_partitions(conn, "bench", group, page=ALL))
        print(f"\nmedian of {REPEATS}: partition_lags {fresh:.1f} ms, group_partitions {listing:.1f} ms")
        counts = {
            "the cluster's lagging groups": GROUP_COUNT,
            "every topic's lagging groups": LAGGING_BY_TOPIC,
            "one topic's lagging groups": LAGGING_OF_TOPICS,
            "a page of 100 topics' lagging groups": LAGGING_OF_TOPICS,
        }
        pages = {"one topic's lagging groups": ["t0"], "a page of 100 topics' lagging groups": TOPICS_PAGE}
        times = []
        for name, query in counts.items():
            params = {"c": "bench", "ts": pages.get(name, [])}
            plan = conn.execute(text(f"EXPLAIN (ANALYZE, BUFFERS) {query}"), params)
            print(f"\n## {name}, {groups * per_group} group-partitions\n")
            print("\n".join(str(r[0]) for r in plan))
            ms = median_ms(lambda q=query, p=params: conn.execute(text(q), p).all())
            times.append(f"{name} {ms:.1f} ms")
        print(f"\nmedian of {REPEATS}: " + ", ".join(times))
    engine.dispose()


if __name__ == "__main__":
    main()

"""The plans and times of the fresh offset lag reads (`monitor.store.fresh_lag`) at a fleet's
size: GROUPS x PARTITIONS group-partitions in `latest_group_offsets`, their commits in
`latest_commits` and the partitions' end offsets in `latest_partition_offsets`, and an
evaluation's `derived_group_partition` rows. Prints EXPLAIN (ANALYZE, BUFFERS) of one group's
fresh read and of its partition listing (the API's `…/groups/{group}/lag`), each the median of
REPEATS runs.

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
from monitor.expose.read.fresh import partition_lags
from monitor.expose.read.queries import ALL
from monitor.store.engine import make_engine
from monitor.store.fresh_lag import FRESH_PARTITIONS
from monitor.store.partitions import ensure_partitions

REPEATS = 20
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
    """INSERT INTO derived_cluster (cluster, evaluated_at) VALUES ('bench', :at)""",
    """INSERT INTO derived_group_partition (cluster, group_id, topic, partition, evaluated_at,
                                            committed_offset, end_offset, offset_lag, status)
       SELECT cluster, group_id, topic, partition, :at, committed_offset, end_offset, lag, 'OK'
       FROM latest_group_offsets WHERE cluster = 'bench'""",
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
        "derived_group_partition",
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
    engine.dispose()


if __name__ == "__main__":
    main()

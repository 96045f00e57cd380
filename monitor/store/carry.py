"""What an incremental evaluation carries: the consumer groups whose rows it copies from the plan's
previous evaluation instead of computing them again (monitor.evaluate.job).

A group is carried when nothing an evaluation reads of it can have changed its rows since the
previous one, which the store decides in one statement (`CARRIED`):

- at the previous evaluation every one of its group-partitions was caught up and still: offset
  lag 0, committed offset = end offset, status OK, sampled, no lag seconds, no consume or produce
  rate, not committed beyond the end;
- since the window of the previous evaluation began, every sample of it (its committed offsets
  and append times, its partitions' end offsets, its state and members) holds the same values,
  with at least two of each in the current window (a rate of one sample is unknown, not 0); its
  latest rows are the same group-partitions at the same offsets, sampled by the newest offsets
  run, with no commit observed since (`latest_commits`; `QUIET_COMMITS` before it: one written
  late still counts).
  For a group the previous evaluation carried, whose samples up to then that decision compared,
  only the samples since the offsets run before it began are compared (`recent`): a window holds
  sixty samples of each group-partition at the default intervals, and about two are new; the
  others are compared over the whole window;
- nothing is open on it (no finding on the group, its topics or its partitions) and no lag
  objective applies to it (their minutes and burn rates move with the clock).

Its rows are then the previous ones but for the time since its last commit, which grows by the
time between the two evaluations (`carry_rows`, computed from whole microseconds as the
transforms compute it, so that the two agree to the last bit). The differential test
(tests/integration/test_evaluate_incremental.py) runs both kinds on the same data.

Which groups are carried is written to `evaluation_carried` beside the plan's clock before each
evaluation, and the plan's group inputs leave them out (evaluate.extract). `evaluation_clocks.
completed_at` is the plan's last evaluation whose rows were all written: the one to carry from.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, CursorResult, ForeignKey, Text, TextClause, delete, text, update
from sqlalchemy.orm import Mapped, mapped_column

from monitor.core.derived import table_of
from monitor.store.base import Base
from monitor.store.evaluation import DERIVED_TABLES, EvaluationClock
from monitor.store.local_settings import local_settings, setting_statement

GROUP_ENTITIES = ("group_partition", "group_topic", "group")
"""The entities of a consumer group, whose rows a carried group copies."""

QUIET_COMMITS = timedelta(seconds=60)
"""A group whose last commit was observed later than this before the previous evaluation is not
carried: a commit observation written late (the store briefly away) may not have been read then."""


class EvaluationCarried(Base):
    """Group `group_id` of `cluster` is carried by the next evaluation of plan `plan_id` (gone
    with the plan's clock)."""

    __tablename__ = "evaluation_carried"

    plan_id: Mapped[str] = mapped_column(
        Text, ForeignKey("evaluation_clocks.plan_id", ondelete="CASCADE"), primary_key=True
    )
    cluster: Mapped[str] = mapped_column(Text, primary_key=True)
    group_id: Mapped[str] = mapped_column(Text, primary_key=True)


_GP = table_of("group_partition")

_SAME_SAMPLES = """bool_and(coalesce(
                o.committed_offset = l.committed_offset AND o.lag = 0
                AND o.end_offset IS NOT DISTINCT FROM l.end_offset
                AND o.start_offset IS NOT DISTINCT FROM l.start_offset
                AND o.consumed_timestamp IS NOT DISTINCT FROM l.consumed_timestamp
                AND o.committed_timestamp IS NOT DISTINCT FROM l.committed_timestamp
                AND o.timestamp_method IS NOT DISTINCT FROM l.timestamp_method
                AND o.timestamp_error_ms IS NOT DISTINCT FROM l.timestamp_error_ms, false
            )) AND count(*) FILTER (WHERE o.sampled_at > CAST(:now AS timestamptz) - :window) >= 2"""
"""A group-partition's samples `o` (grouped) all hold its latest row `l`'s values, with at least two
in the current window (a rate of one sample is unknown, not 0)."""

_SAME_ENDS = """min(o.end_offset) = max(o.end_offset)
           AND count(*) FILTER (WHERE o.sampled_at > CAST(:now AS timestamptz) - :window) >= 2"""
"""A partition's end offset samples `o` (grouped) all hold the same offset, at least two in the
current window."""

CARRIED = text(
    f"""
    INSERT INTO evaluation_carried (plan_id, cluster, group_id)
    WITH prev AS (
        SELECT cluster, group_id, topic, "partition", committed_offset, end_offset, group_state, members
        FROM {_GP} WHERE evaluated_at = :previous AND cluster = ANY(:clusters)
    ), quiet AS (
        SELECT cluster, group_id, count(*) AS partitions
        FROM {_GP} WHERE evaluated_at = :previous AND cluster = ANY(:clusters)
        GROUP BY cluster, group_id
        HAVING bool_and(coalesce(
            offset_lag = 0 AND committed_offset = end_offset AND status = 'OK' AND sampled
            AND committed_beyond_end IS NOT TRUE AND coalesce(lag_seconds, 0) = 0
            AND consume_rate = 0 AND produce_rate = 0
            AND group_state IS NOT NULL AND group_state <> 'Unknown', false
        )) AND count(DISTINCT (group_state, members)) = 1
    ), runs AS (
        SELECT cluster, max(started_at) AS started_at FROM collection_runs
        WHERE cluster = ANY(:clusters) AND job = :offsets_job AND status = ANY(:reached)
          AND started_at > CAST(:now AS timestamptz) - :window AND started_at <= :now
        GROUP BY cluster
    ), latest AS (
        SELECT l.cluster, l.group_id, count(*) AS partitions, bool_and(coalesce(
            p.committed_offset IS NOT NULL AND l.committed_offset = p.committed_offset
            AND l.lag = 0 AND l.end_offset = p.end_offset AND l.gone_at IS NULL
            AND l.sampled_at > CAST(:now AS timestamptz) - :stale_after AND l.sampled_at <= :now
            AND (r.started_at IS NULL OR l.sampled_at >= r.started_at)
            AND (c.observed_at IS NULL
                 OR c.observed_at <= CAST(:previous AS timestamptz) - :quiet_commits), false
        )) AS same
        FROM latest_group_offsets l
        LEFT JOIN latest_commits c USING (cluster, group_id, topic, "partition")
        LEFT JOIN prev p USING (cluster, group_id, topic, "partition")
        LEFT JOIN runs r ON r.cluster = l.cluster
        WHERE l.cluster = ANY(:clusters) AND (l.cluster, l.group_id) IN (SELECT cluster, group_id FROM quiet)
        GROUP BY l.cluster, l.group_id
    ), runs_then AS (
        SELECT cluster, max(started_at) AS started_at FROM collection_runs
        WHERE cluster = ANY(:clusters) AND job = :offsets_job AND status = ANY(:reached)
          AND started_at > :since AND started_at <= :previous
        GROUP BY cluster
    ), was AS (
        SELECT w.cluster, w.group_id, r.started_at
        FROM unnest(CAST(:was_clusters AS text[]), CAST(:was_groups AS text[])) AS w(cluster, group_id)
        JOIN runs_then r ON r.cluster = w.cluster
        WHERE (w.cluster, w.group_id) IN (SELECT cluster, group_id FROM quiet)
    ), recent AS (
        SELECT k.cluster, k.group_id FROM (
            SELECT o.cluster, o.group_id FROM group_offsets o
            JOIN was w ON w.cluster = o.cluster AND w.group_id = o.group_id
            JOIN latest_group_offsets l
              ON l.cluster = o.cluster AND l.group_id = o.group_id AND l.topic = o.topic
                 AND l."partition" = o."partition"
            WHERE o.cluster = ANY(:clusters) AND o.sampled_at >= (SELECT min(started_at) FROM runs_then)
              AND o.sampled_at >= w.started_at AND o.sampled_at <= :now
            GROUP BY o.cluster, o.group_id, o.topic, o."partition"
            HAVING {_SAME_SAMPLES}
        ) k
        JOIN quiet q ON q.cluster = k.cluster AND q.group_id = k.group_id
        GROUP BY k.cluster, k.group_id, q.partitions HAVING count(*) = q.partitions
    ), recent_ends AS (
        SELECT p.cluster, p.group_id, count(*) AS partitions FROM prev p
        JOIN recent r ON r.cluster = p.cluster AND r.group_id = p.group_id
        JOIN (
            SELECT o.cluster, o.topic, o."partition", min(o.end_offset) AS end_offset
            FROM partition_offsets o JOIN runs_then t ON t.cluster = o.cluster
            WHERE o.cluster = ANY(:clusters) AND o.sampled_at >= (SELECT min(started_at) FROM runs_then)
              AND o.sampled_at >= t.started_at AND o.sampled_at <= :now
              AND (o.cluster, o.topic, o."partition") IN (
                SELECT p.cluster, p.topic, p."partition" FROM prev p JOIN recent r USING (cluster, group_id)
              )
            GROUP BY o.cluster, o.topic, o."partition"
            HAVING {_SAME_ENDS}
        ) e ON e.cluster = p.cluster AND e.topic = p.topic AND e."partition" = p."partition"
        WHERE e.end_offset = p.end_offset
        GROUP BY p.cluster, p.group_id
    ), recent_whole AS (
        SELECT r.cluster, r.group_id, r.partitions FROM recent_ends r
        JOIN quiet q ON q.cluster = r.cluster AND q.group_id = r.group_id AND q.partitions = r.partitions
    ), unverified AS (
        SELECT cluster, group_id FROM quiet
        EXCEPT SELECT cluster, group_id FROM recent_whole
    ), samples AS (
        SELECT cluster, group_id, count(*) AS partitions FROM (
            SELECT o.cluster, o.group_id FROM group_offsets o
            JOIN latest_group_offsets l USING (cluster, group_id, topic, "partition")
            WHERE o.cluster = ANY(:clusters) AND o.sampled_at > :since AND o.sampled_at <= :now
              AND (o.cluster, o.group_id) IN (SELECT cluster, group_id FROM unverified)
            GROUP BY o.cluster, o.group_id, o.topic, o."partition"
            HAVING {_SAME_SAMPLES}
        ) k GROUP BY cluster, group_id
    ), ends AS (
        SELECT o.cluster, o.topic, o."partition", min(o.end_offset) AS end_offset
        FROM partition_offsets o
        WHERE o.cluster = ANY(:clusters) AND o.sampled_at > :since AND o.sampled_at <= :now
          AND (o.cluster, o.topic, o."partition") IN (
            SELECT p.cluster, p.topic, p."partition" FROM prev p JOIN unverified u USING (cluster, group_id)
          )
        GROUP BY o.cluster, o.topic, o."partition"
        HAVING {_SAME_ENDS}
    ), full_ends AS (
        SELECT p.cluster, p.group_id, count(*) AS partitions FROM prev p
        JOIN unverified u ON u.cluster = p.cluster AND u.group_id = p.group_id
        JOIN ends e ON e.cluster = p.cluster AND e.topic = p.topic AND e."partition" = p."partition"
        WHERE e.end_offset = p.end_offset
        GROUP BY p.cluster, p.group_id
    ), verified AS (
        SELECT s.cluster, s.group_id, s.partitions FROM samples s
        JOIN full_ends e ON e.cluster = s.cluster AND e.group_id = s.group_id AND e.partitions = s.partitions
        UNION ALL
        SELECT cluster, group_id, partitions FROM recent_whole
    ), moved AS (
        SELECT s.cluster, s.group_id FROM group_states s
        JOIN (SELECT DISTINCT cluster, group_id, group_state, members FROM prev) p
          ON p.cluster = s.cluster AND p.group_id = s.group_id
        WHERE s.cluster = ANY(:clusters) AND s.sampled_at > :since AND s.sampled_at <= :now
          AND (s.state <> p.group_state OR s.members IS DISTINCT FROM p.members)
        UNION
        SELECT g.cluster, g.group_id FROM objective_groups g WHERE g.plan_id = :plan_id
    ), open AS (
        SELECT DISTINCT f.cluster, split_part(f.entity_key, :separator, 2) AS group_key FROM findings f
        WHERE f.cluster = ANY(:clusters) AND f.state <> 'resolved' AND f.entity = ANY(:group_entities)
    ), stated AS (
        SELECT DISTINCT cluster, group_id FROM group_states
        WHERE cluster = ANY(:clusters) AND sampled_at > CAST(:now AS timestamptz) - :window
          AND sampled_at <= :now
    )
    SELECT :plan_id, q.cluster, q.group_id
    FROM quiet q
    JOIN latest l ON l.cluster = q.cluster AND l.group_id = q.group_id
    JOIN verified v ON v.cluster = q.cluster AND v.group_id = q.group_id
    JOIN stated s ON s.cluster = q.cluster AND s.group_id = q.group_id
    WHERE l.same AND l.partitions = q.partitions AND v.partitions = q.partitions
      AND NOT EXISTS (SELECT 1 FROM moved m WHERE m.cluster = q.cluster AND m.group_id = q.group_id)
      AND NOT EXISTS (
        SELECT 1 FROM open o
        WHERE o.cluster = q.cluster
          AND o.group_key = replace(replace(q.group_id, '%', '%25'), :separator, '%2F')
      )
    """
)
"""The statement deciding the carried groups (see the module's docstring; `bool_and` skips a null,
so each condition is false when unknown). The scans of the window's samples are limited to the
groups that were `quiet` at the previous evaluation: in a busy fleet, where none is, they read
nothing; and of those, to the groups the previous decision did not carry (`unverified`): in a
still fleet, they read the samples since the previous evaluation's offsets run only.

Why those suffice for a group carried then (`was`, with the newest offsets run at or before the
previous evaluation, `runs_then`): that decision found every sample from its own previous
evaluation's window start up to it equal to the group's latest row then, and that row was
sampled by that run or a later one, whose samples are all stamped after the run's start; a
collector writes its batches in order, the history after the latest rows, so nothing stamped
earlier was written after that decision. If every sample since the run's start equals the latest
row now, the latest row then (one of them) is the latest row now, and so is every sample of the
window. A finding names its
group in its `entity_key` escaped as the evaluation escapes it (evaluate.engine: '%' and the key
separator)."""


PLANNER_SETTINGS = ("enable_nestloop", "enable_mergejoin", "enable_sort")
CARRY_SETTINGS = dict.fromkeys(PLANNER_SETTINGS, "off")
CARRY_PLANNER = setting_statement(CARRY_SETTINGS)
"""The planner setting the carry's statements run under (`CARRIED` and the copies of
`carry_rows`, each for itself only). The evaluation they read was written moments before, often
into a partition without statistics (the day's first, a new deployment's), and CARRIED's grouped
CTEs hide their sizes: PostgreSQL then guesses a row or two for each side and joins them in
nested loops, or in a merge join on the cluster alone (one value: every row against every row).
At 100,000 group-partitions of a still fleet one such loop compared the previous evaluation's
100,000 rows with 9,600 partitions' end offsets row by row (235 s instead of 4.3 s), and such a
merge join made the copy of the carried rows take 20.6 s instead of 1
(docs/bench/evaluate-incremental.md). Hash joins cost little whatever the sizes are. And
guessing few rows, it sorts the window's samples to group them: 752,000 rows of 159 bytes at
100,000 group-partitions, 5.1 s where hashing them takes 2.7."""


def _unlooped(conn: Connection, statement: TextClause, values: dict[str, object]) -> CursorResult[Any]:
    """`statement` run under CARRY_PLANNER, the settings then as they were for the rest of the
    transaction (store.local_settings)."""
    with local_settings(conn, CARRY_SETTINGS):
        result = conn.execute(statement, values)
    return result


def choose_carried(
    conn: Connection,
    plan_id: str,
    clusters: Sequence[str],
    previous: datetime | None,
    now: datetime,
    window: timedelta,
    *,
    stale_after: timedelta,
    separator: str,
    offsets_job: str,
    reached: Sequence[str],
) -> int:
    """Decide which groups of `clusters` the evaluation of plan `plan_id` at `now` carries from
    its evaluation at `previous` (earlier than `now`; none without one); returns how many. Run
    after the plan's objective groups are set, in the same transaction. `stale_after`,
    `separator`, `offsets_job` and `reached` are the evaluation's own: a sample older than it is
    not current, the key separator of a finding, the offsets job and its run statuses that reached
    the cluster."""
    was = conn.execute(
        delete(EvaluationCarried)
        .where(EvaluationCarried.plan_id == plan_id)
        .returning(EvaluationCarried.cluster, EvaluationCarried.group_id)
    ).all()
    if previous is None:
        return 0
    values: dict[str, object] = {
        "plan_id": plan_id,
        "clusters": list(clusters),
        "previous": previous,
        "now": now,
        "since": previous - window,
        "window": window,
        "stale_after": stale_after,
        "quiet_commits": QUIET_COMMITS,
        "separator": separator,
        "offsets_job": offsets_job,
        "reached": list(reached),
        "group_entities": list(GROUP_ENTITIES),
        "was_clusters": [cluster for cluster, _ in was],
        "was_groups": [group for _, group in was],
    }
    return int(_unlooped(conn, CARRIED, values).rowcount)


def carry_rows(conn: Connection, plan_id: str, previous: datetime, now: datetime) -> dict[str, int]:
    """Copy the rows of the carried groups of plan `plan_id` from its evaluation at `previous` to
    `now` (whose earlier rows are already removed); returns the rows copied per entity.

    The time since the last commit grows by `now - previous`, computed as the transforms do: whole
    microseconds divided once (the stored seconds are a whole number of microseconds over a
    million, so they convert back exactly)."""
    copied = {}
    for entity in GROUP_ENTITIES:
        table = table_of(entity)
        columns = [
            column.name
            for column in DERIVED_TABLES[entity].columns
            if column.name not in ("evaluated_at", "time_since_last_commit_seconds")
        ]
        listed = ", ".join(f'd."{c}"' for c in columns)
        statement = text(
            f"""
            INSERT INTO {table} ({", ".join(f'"{c}"' for c in columns)}, time_since_last_commit_seconds,
                                 evaluated_at)
            SELECT {listed},
                   (round(d.time_since_last_commit_seconds * 1000000)::bigint
                    + (extract(epoch FROM CAST(:now AS timestamptz) - CAST(:previous AS timestamptz))
                       * 1000000)::bigint)::float8 / 1000000::float8,
                   :now
            FROM {table} d
            JOIN evaluation_carried k
              ON k.plan_id = :plan_id AND k.cluster = d.cluster AND k.group_id = d.group_id
            WHERE d.evaluated_at = :previous
            """
        )
        values: dict[str, object] = {"plan_id": plan_id, "previous": previous, "now": now}
        copied[entity] = int(_unlooped(conn, statement, values).rowcount)
    return copied


def previous_evaluation(conn: Connection, plan_id: str) -> datetime | None:
    """The plan's last evaluation whose rows were all written (None before its first)."""
    return conn.execute(
        text("SELECT completed_at FROM evaluation_clocks WHERE plan_id = :p"), {"p": plan_id}
    ).scalar_one_or_none()


def carried_partitions(conn: Connection, plan_id: str) -> int:
    """The group-partitions (rows of `latest_group_offsets`) of the groups plan `plan_id`'s next
    evaluation carries: what it does not compute."""
    return int(
        conn.execute(
            text(
                "SELECT count(*) FROM latest_group_offsets l JOIN evaluation_carried k"
                " ON k.plan_id = :p AND k.cluster = l.cluster AND k.group_id = l.group_id"
            ),
            {"p": plan_id},
        ).scalar_one()
    )


def copy_carried(conn: Connection, decided: str, plan_id: str) -> None:
    """The groups decided for plan `decided` are carried by plan `plan_id`'s evaluation at the same
    time instead: one that computes few enough rows for a smaller plan (one action) runs on it,
    and both plans' rows are the same derived tables' (the previous evaluation of either is the
    one to carry from: `mark_completed` marks both). `decided` keeps them: its next decision
    reads them (`choose_carried`)."""
    conn.execute(delete(EvaluationCarried).where(EvaluationCarried.plan_id == plan_id))
    conn.execute(
        text(
            "INSERT INTO evaluation_carried (plan_id, cluster, group_id)"
            " SELECT :to, cluster, group_id FROM evaluation_carried WHERE plan_id = :decided"
        ),
        {"to": plan_id, "decided": decided},
    )


def mark_completed(conn: Connection, plan_ids: Collection[str], evaluated_at: datetime) -> None:
    """The evaluation at `evaluated_at` of plans `plan_ids` (the one that decided the carry and the
    one that ran it) wrote all its rows: the next of either may carry from it."""
    conn.execute(
        update(EvaluationClock)
        .where(EvaluationClock.plan_id.in_(list(plan_ids)))
        .values(completed_at=evaluated_at)
    )

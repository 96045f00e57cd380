"""The sliding-window status (status.py) as Spark column expressions, so it runs inside the JVM.

`status.py` states Burrow's rules as small pure Python functions over a list of commits; that is
the specification, tested with numbered tables. This module computes the same window and the same
verdicts with Spark's array functions over an array of (time_ms, offset, lag) structs, one step
per column, and a test checks it against the Python functions on the numbered cases and on
random windows. A Python UDF would ship every group-partition's window to a Python worker and
back: at a million group-partitions that alone took longer than the whole evaluation may.

Indices are 0-based (`F.get`, null outside the array); each step is its own column so that the
steps after it read a column instead of recomputing the expression.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from monitor.evaluate.transforms.common import moment
from monitor.evaluate.transforms.status import (
    DEFAULT_WINDOW_COMMITS,
    OK,
    REWIND,
    STALL,
    STOP,
    T_CRITICAL,
    WARN,
)

_TEMPORARY = (
    "_lagging", "_sorted", "_ordered", "_at", "_changes", "_last", "_first", "_commits", "_caught_up",
    "_reference", "_new_data", "_picked",
)  # fmt: skip


def millis(time: Column) -> Column:
    """A timestamp column as epoch milliseconds (floor), as the window entries hold time."""
    return F.floor(F.unix_micros(time) / 1000).cast("bigint")


def entry(time: Column, offset: Column, lag: Column) -> Column:
    """One sample as a window entry: (time_ms, offset, lag), ordered by time first."""
    return F.struct(
        millis(time).alias("time_ms"), offset.cast("bigint").alias("offset"), lag.cast("bigint").alias("lag")
    )


def with_status(
    frame: DataFrame,
    entries: str,
    last_commit_ms: Column,
    now: datetime | Column,
    size: int = DEFAULT_WINDOW_COMMITS,
) -> DataFrame:
    """`frame` plus `status`, from its column `entries` (an array of `entry` structs: the samples
    of one group-partition with a known lag, in any order) and `last_commit_ms` (the last observed
    commit, epoch ms, or null). Null status when there are no entries. See status.py for the rules.

    Rule 1 needs only the newest entry (the window always ends with it): a consumer with no lag
    there is OK, and nothing else is computed for it (every step below is null).

    The other rules are computed on the ordered samples (`_ordered`: one per time, the first
    dated at an older observed commit) without building the window itself, from what it is made
    of (status.commit_window): the change indices C (the last `size` of them, from F, are the
    window's commits; the last, L, starts the run of the current offset), the last caught-up
    sample K at or after L, the reference R = K or else L, and the first sample D after R with a
    higher end offset. In the window, consecutive commits always differ in offset and everything
    from L on shares L's offset, so the window's run start is L, its idle reference is R, its
    first entry is F and its first entry after R with new data is D.
    """
    newest = F.array_max(F.col(entries))  # structs compare by time_ms first
    frame = frame.withColumn("_lagging", newest["lag"] > 0)  # null without entries
    frame = _decide(_parts(frame, entries, last_commit_ms, size), moment(now))
    return frame.drop(*_TEMPORARY)


def _when_lagging(value: Column) -> Column:
    return F.when(F.col("_lagging"), value)


def _end(item: Column) -> Column:
    return item["offset"] + item["lag"]


def _parts(frame: DataFrame, entries: str, last_commit_ms: Column, size: int) -> DataFrame:
    """Adds `_ordered`, its indices `_at`, the change indices `_changes`, and `_last` (L),
    `_first` (F), `_commits`, `_caught_up` (K), `_reference` (R) and `_new_data` (D)."""
    sorted_ = F.col("_sorted")
    distinct_times = F.filter(
        sorted_, lambda x, i: (i == F.size(sorted_) - 1) | (x["time_ms"] != F.get(sorted_, i + 1)["time_ms"])
    )
    dated = F.transform(
        distinct_times,
        lambda x, i: F.when(
            (i == 0) & (last_commit_ms < x["time_ms"]),
            F.struct(last_commit_ms.alias("time_ms"), x["offset"].alias("offset"), x["lag"].alias("lag")),
        ).otherwise(x),
    )
    o, at, changes = F.col("_ordered"), F.col("_at"), F.col("_changes")
    last = F.col("_last")
    reference = F.get(o, F.col("_reference"))
    return (
        frame.withColumn("_sorted", _when_lagging(F.array_sort(F.col(entries))))
        .withColumn("_ordered", dated)
        .withColumn("_at", _when_lagging(F.sequence(F.lit(0), F.size(o) - 1)))
        .withColumn(
            "_changes",
            F.filter(at, lambda i: (i == 0) | (F.get(o, i)["offset"] != F.get(o, i - 1)["offset"])),
        )
        .withColumn("_last", F.try_element_at(changes, F.lit(-1)))
        .withColumn("_first", F.get(changes, F.greatest(F.size(changes) - size, F.lit(0))))
        # The window's commits: the change indices from F on (each an increase or a decrease).
        .withColumn("_commits", F.filter(changes, lambda c: c >= F.col("_first")))
        .withColumn(
            "_caught_up",
            F.try_element_at(F.filter(at, lambda i: (i >= last) & (F.get(o, i)["lag"] <= 0)), F.lit(-1)),
        )
        .withColumn("_reference", F.coalesce(F.col("_caught_up"), last))
        .withColumn(
            "_new_data",
            F.try_element_at(
                F.filter(at, lambda i: (i > F.col("_reference")) & (_end(F.get(o, i)) > _end(reference))),
                F.lit(1),
            ),
        )
    )


def _decide(frame: DataFrame, now: Column) -> DataFrame:
    """Adds `status`: status.evaluate's rules on the window, first that holds."""
    now_ms = F.unix_millis(now)
    o, first = F.col("_ordered"), F.col("_first")
    current = F.get(o, F.size(o) - 1)  # lagging: rule 1 does not hold
    reference = F.get(o, F.col("_reference"))
    waiting_since = (
        F.when(_end(current) <= _end(reference), F.lit(None).cast("bigint"))
        .when(reference["lag"] > 0, reference["time_ms"])
        .otherwise(F.get(o, F.col("_new_data"))["time_ms"])
    )
    stopped = waiting_since.isNotNull() & (
        now_ms - waiting_since > reference["time_ms"] - F.get(o, first)["time_ms"]
    )
    commits = F.col("_commits")
    went_back = F.exists(commits, lambda c: (c > first) & (F.get(o, c)["offset"] < F.get(o, c - 1)["offset"]))
    rewound = went_back & (
        current["offset"] < F.array_max(F.transform(commits, lambda c: F.get(o, c)["offset"]))
    )
    any_lag_zero = F.col("_caught_up").isNotNull() | F.exists(commits, lambda c: F.get(o, c)["lag"] <= 0)
    picked = F.col("_picked")
    window_size = F.size(picked)
    stalled = (window_size >= 2) & (F.size(commits) == 1)
    entries = F.transform(picked, lambda i: F.get(o, i))
    status = (
        F.when(F.col("_lagging").isNull(), F.lit(None).cast("string"))
        .when(~F.col("_lagging"), F.lit(OK))
        .when(stopped, F.lit(STOP))
        .when(rewound, F.lit(REWIND))
        .when(any_lag_zero, F.lit(OK))
        .when(stalled, F.lit(STALL))
        .when((window_size >= 3) & _falling_behind(entries), F.lit(WARN))
        .otherwise(F.lit(OK))
    )
    singles = F.filter(
        F.array(F.col("_caught_up"), F.col("_new_data"), F.size(o) - 1), lambda i: i.isNotNull()
    )
    window = F.array_sort(F.array_distinct(F.concat(commits, singles)))
    return frame.withColumn("_picked", _when_lagging(window)).withColumn("status", status)


def _falling_behind(entries: Column) -> Column:
    """status.falling_behind on an array of window entries in time order (at least 3): the same
    step (in longs), the same sums, in the same order, of the same doubles, and the same
    comparison."""
    first = F.get(entries, 0)["time_ms"]
    zero = F.lit(0.0).cast("double")
    start = F.struct(*[zero.alias(name) for name in ("st", "sy", "st2", "sty", "sy2")])

    def add(acc: Column, x: Column) -> Column:
        t, y = (x["time_ms"] - first).cast("double"), x["lag"].cast("double")
        return F.struct(
            (acc["st"] + t).alias("st"),
            (acc["sy"] + y).alias("sy"),
            (acc["st2"] + t * t).alias("st2"),
            (acc["sty"] + t * y).alias("sty"),
            (acc["sy2"] + y * y).alias("sy2"),
        )

    sums = F.aggregate(entries, start, add)
    n = F.size(entries).cast("double")
    a = n * sums["st2"] - sums["st"] * sums["st"]
    b = n * sums["sty"] - sums["st"] * sums["sy"]
    c = n * sums["sy2"] - sums["sy"] * sums["sy"]
    table = F.array(*[F.lit(value) for value in T_CRITICAL])
    t = F.get(table, F.least(F.size(entries) - 2, F.lit(len(T_CRITICAL))) - 1)
    t2 = t * t
    last = F.get(entries, F.size(entries) - 1)
    first_end = F.get(entries, 0)["offset"] + F.get(entries, 0)["lag"]
    behind = (F.size(entries) - 1).cast("long") * last["lag"] > last["offset"] + last["lag"] - first_end
    return behind & (a > 0) & (b > 0) & (b * b * (n - 2 + t2) > t2 * a * c)

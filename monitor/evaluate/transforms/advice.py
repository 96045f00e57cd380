"""Consumer advice (DOMAIN.md, "consumer advice"): how many consumers a lagging group needs.

- A partition's *need* (records/s) is the rate at which the group must read it to read its
  backlog, and what arrives meanwhile, before its deadline: offset_lag / deadline + produce_rate.
  The deadline is the time until retention deletes its oldest unread message
  (time_until_data_loss_seconds, at least MIN_DEADLINE: a deletion already due is read as
  imminent) or, when no deletion is ahead, monitor.core.derived.ADVICE_HORIZON. A caught-up
  partition needs its produce rate (to keep up).
- A consumer's rate is the group's consume_rate over the window divided by the consumers that
  read: its members, at most one per partition (the others sit idle).
- `consumers_needed` = ceil(the group's summed need / a consumer's rate), at most the group's
  partitions (a partition is read by one consumer of the group at a time).
- `advice_limited_by`: 'partitions' when the need, spread evenly, wants more consumers than
  there are partitions (add partitions); else 'hot_partition' when the hottest partition's need
  alone is more than a consumer reads (`hot_topic`, `hot_partition`: more consumers cannot help
  it; spread its keys); else null.
- No advice (all null) when the group is not lagging, has no positive consume rate over the
  window or no member: a stopped group needs its consumers started, not more of them.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column
from pyspark.sql import functions as F

from monitor.core.derived import ADVICE_HORIZON
from monitor.evaluate.transforms.common import ratio

MIN_DEADLINE = timedelta(minutes=1)
"""The shortest deadline the advice works to: a deletion due now is read as due in this long."""

ADVICE_COLUMNS = ("consumers_needed", "advice_limited_by", "hot_topic", "hot_partition")


def _partition_need() -> Column:
    """The need of a group-partition row (module docstring); null when its lag is unknown."""
    loss = F.col("time_until_data_loss_seconds")
    # greatest() skips nulls: the horizon stands in for a null before the floor is applied.
    deadline = F.greatest(
        F.coalesce(loss, F.lit(ADVICE_HORIZON.total_seconds())), F.lit(MIN_DEADLINE.total_seconds())
    )
    produce = F.greatest(F.coalesce(F.col("produce_rate"), F.lit(0.0)), F.lit(0.0))
    return F.col("offset_lag").cast("double") / deadline + produce


def need_parts() -> list[Column]:
    """The advice's roll-up parts of group-partition rows: `need_rate`, the summed need, and
    `hottest`, the hottest partition's (need, topic, partition) struct."""
    need = _partition_need()
    return [
        F.sum(need).alias("need_rate"),
        F.max(F.struct(need.alias("need"), F.col("topic"), F.col("partition"))).alias("hottest"),
    ]


def regrouped_need_parts() -> list[Column]:
    """`need_parts` of rows that carry them (a coarser roll-up): summed and maxed alike."""
    return [F.sum("need_rate").alias("need_rate"), F.max("hottest").alias("hottest")]


def consumer_advice() -> list[Column]:
    """ADVICE_COLUMNS of a group row with `need_parts`, `offset_lag`, `consume_rate`, `members` and
    `partitions` (module docstring)."""
    readers = F.least(F.col("members"), F.col("partitions"))
    per_consumer = ratio(F.col("consume_rate"), readers)
    applies = (F.col("offset_lag") > 0) & (F.col("consume_rate") > 0) & (F.col("members") > 0)
    wanted = F.ceil(F.col("need_rate") / per_consumer)
    hot = F.col("hottest.need") > per_consumer
    limited = F.when(wanted > F.col("partitions"), F.lit("partitions")).when(hot, F.lit("hot_partition"))
    names_hot = applies & (limited == "hot_partition")
    return [
        F.when(applies, F.least(wanted, F.col("partitions"))).cast("int").alias("consumers_needed"),
        F.when(applies, limited).alias("advice_limited_by"),
        F.when(names_hot, F.col("hottest.topic")).alias("hot_topic"),
        F.when(names_hot, F.col("hottest.partition")).alias("hot_partition"),
    ]

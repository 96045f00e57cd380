"""Red, amber, green for the dashboard: what each row of a page counts as, and the worst-first
orders the tables use. On-call engineers look before they read, so every page colours each row
and sorts the worst to the top.

A row is red where a rule would page (critical), amber where it would post to Slack (warning),
so the page and the pager agree, judged on the same derived columns from the same evaluation.
The data-loss risk is coloured by TimeUntilDataLoss's own tiers, read from the rule files the
evaluation uses (`RuleScale`): the margin (`data_loss_margin_seconds`), not the deletion time, so
a group that keeps up on a short-retention topic is green, as the rule stays quiet. The other
thresholds below are the default rule pack's (`alert_rules/*.yaml`).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from monitor.core.vocabulary import STATUS_RANK
from monitor.evaluate.rules import Rule, load_rules, rule_files, upper_bound

log = logging.getLogger(__name__)

BAD: Final = "bad"
WARN: Final = "warn"
OK: Final = "ok"
RANK: Final = {BAD: 0, WARN: 1, OK: 2}

DATA_LOSS_RULE: Final = "TimeUntilDataLoss"
DATA_LOSS_COLUMN: Final = "data_loss_margin_seconds"
"""The rule whose tiers colour the data-loss risk, and the column they compare."""
LAG_CRITICAL_SECONDS: Final = 3600.0
LAG_WARNING_SECONDS: Final = 900.0
"""ConsumerLagSeconds."""
APPEND_LAG_WARNING_SECONDS: Final = 300.0
"""ConsumerAppendLag."""
DISK_RED: Final = 0.95
DISK_AMBER: Final = 0.85
"""BrokerDiskHeadroom."""
LEADERS_AMBER_HIGH: Final = 1.5
LEADERS_AMBER_LOW: Final = 0.5
"""LeaderImbalance (a warning at most: an uneven load is never a page)."""
SIZE_RATIO_AMBER: Final = 0.9
"""PartitionNearRetentionBytes."""

STATUS_SEVERITY: Final = STATUS_RANK
"""Burrow's ordering (`monitor.core.vocabulary.STATUS_RANK`)."""


def worst(*healths: str) -> str:
    return min(healths, key=RANK.__getitem__, default=OK)


def _below(value: float | None, limit: float) -> bool:
    return value is not None and not math.isnan(value) and value < limit


def _at_least(value: float | None, limit: float) -> bool:
    return value is not None and not math.isnan(value) and value >= limit


@dataclass(frozen=True, slots=True)
class LossScale:
    """Where the data-loss margin turns a row red (below `critical`) or amber (below `warning`):
    the bounds of TimeUntilDataLoss's critical and warning tiers. None: the rule has no such tier,
    or one whose `when` is not `data_loss_margin_seconds < N`; it colours nothing."""

    critical: float | None = None
    warning: float | None = None

    def health(self, margin: float | None, occurred: bool | None = False) -> str:
        """A margin's colour; a null margin (not at risk) is green; data already lost is red."""
        if occurred or (self.critical is not None and _below(margin, self.critical)):
            return BAD
        return WARN if self.warning is not None and _below(margin, self.warning) else OK


def loss_scale(rules: Iterable[Rule]) -> LossScale:
    """The LossScale of TimeUntilDataLoss among `rules` (no colour without the rule)."""
    rule = next((r for r in rules if r.name == DATA_LOSS_RULE), None)
    if rule is None:
        log.warning("no %s rule: the pages colour no data-loss margin", DATA_LOSS_RULE)
        return LossScale()
    bounds: dict[str, float | None] = {}
    for tier in rule.severities:
        bound = math.inf if tier.when is None else upper_bound(tier.when, DATA_LOSS_COLUMN)
        if bound is None:
            log.warning(
                "%s's %s tier `%s` is not `%s < N`: the pages do not colour it",
                DATA_LOSS_RULE, tier.severity, tier.when, DATA_LOSS_COLUMN,
            )  # fmt: skip
        bounds[tier.severity] = bound
    return LossScale(bounds.get("critical"), bounds.get("warning"))


class RuleScale:
    """The LossScale of the rule files in `rules_dir` (the project's alert_rules/ when None),
    read again when one of them changes: the evaluation reloads them every cycle, and the pages
    follow without a restart. Calls cost a few `stat`s. Thread-safe."""

    def __init__(self, rules_dir: Path | None = None) -> None:
        self._dir = rules_dir
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[str, int, int], ...] | None = None
        self._scale = LossScale()

    def __call__(self) -> LossScale:
        with self._lock:
            try:
                paths = rule_files(self._dir)
                stamp = tuple((str(p), s.st_mtime_ns, s.st_size) for p in paths for s in (p.stat(),))
            except OSError as exc:  # a file removed while it was listed: keep the last scale
                log.warning("cannot read the rule files for the data-loss colours: %s", exc)
                return self._scale
            if stamp != self._stamp:
                self._scale = loss_scale(load_rules(paths).rules)
                self._stamp = stamp
            return self._scale


def leader_health(leaders: int | None, fair_share: float | None, up: bool = True) -> str:
    if not up:
        return BAD
    if leaders is None or fair_share is None or fair_share < 1:
        return OK
    ratio = leaders / fair_share
    return WARN if ratio >= LEADERS_AMBER_HIGH or ratio <= LEADERS_AMBER_LOW else OK


def disk_health(used_ratio: float | None) -> str:
    if _at_least(used_ratio, DISK_RED):
        return BAD
    return WARN if _at_least(used_ratio, DISK_AMBER) else OK


def status_health(status: str | None) -> str:
    """OK green, WARN amber, ERR and the statuses it covers red; unknown (not evaluated) green."""
    severity = STATUS_SEVERITY.get(status or "", 0)
    return BAD if severity >= STATUS_SEVERITY["ERR"] else WARN if severity == 2 else OK


def broker(row: dict[str, Any]) -> str:
    return worst(
        leader_health(row["leaders"], row["fair_share_leaders"], row["up"]),
        disk_health(row["disk_used_ratio"]),
    )


def cluster(card: dict[str, Any], stale: bool) -> str:
    if (
        card["unreachable"]
        or card["brokers_up"] < card["brokers"]
        or card["offline_partitions"]
        or card["under_min_isr_partitions"]
        or card["alerts_critical"]
        or card["groups_lost_data"]
    ):
        return BAD
    if stale or card["under_replicated_partitions"] or card["groups_lagging"] or card["alerts_firing"]:
        return WARN
    return OK


def topic(row: dict[str, Any], loss: LossScale) -> str:
    if row.get("offline_partitions") or row.get("under_min_isr_partitions"):
        return BAD
    if (row.get("max_replicas_lost") or 0) >= 2:
        return BAD
    amber = (
        row.get("under_replicated_partitions")
        or (row.get("retention_shortfall_seconds") or 0) > 0
        or _at_least(row.get("max_size_ratio"), SIZE_RATIO_AMBER)
    )
    return worst(WARN if amber else OK, loss.health(row.get("min_data_loss_margin_seconds")))


def partition(row: dict[str, Any], loss: LossScale) -> str:
    """A partition on the topic page: replication, retention and the groups reading it."""
    offline = row["offline"] or row["leader"] is None  # before its first evaluation too
    if offline or row["under_min_isr"] or (row["replicas_lost"] or 0) >= 2:
        return BAD
    amber = (
        row["under_replicated"]
        or (row["retention_shortfall_seconds"] or 0) > 0
        or _at_least(row["size_ratio"], SIZE_RATIO_AMBER)
    )
    return worst(
        WARN if amber else OK,
        loss.health(row["min_data_loss_margin_seconds"], row["data_loss_occurred"]),
    )


def group(row: dict[str, Any], loss: LossScale) -> str:
    """A consumer group (or its lag on one topic or partition)."""
    lag = row.get("max_lag_seconds", row.get("lag_seconds"))
    if _at_least(lag, LAG_CRITICAL_SECONDS):
        lag_health = BAD
    elif _at_least(lag, LAG_WARNING_SECONDS) or _at_least(
        row.get("append_lag_seconds"), APPEND_LAG_WARNING_SECONDS
    ):
        lag_health = WARN
    else:
        lag_health = OK
    return worst(
        status_health(row.get("worst_status") or row.get("status")),
        loss.health(row.get("data_loss_margin_seconds"), row.get("data_loss_occurred")),
        lag_health,
    )


def _soonest(seconds: float | None) -> float:
    return math.inf if seconds is None or math.isnan(seconds) else seconds


def topics_worst_first(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Offline, then under min ISR, then under-replicated, then retention shortfall, then the
    smallest data-loss margin."""
    return sorted(
        rows,
        key=lambda r: (
            RANK[r["health"]],
            -(r.get("offline_partitions") or 0),
            -(r.get("under_min_isr_partitions") or 0),
            -(r.get("under_replicated_partitions") or 0),
            -(r.get("retention_shortfall_seconds") or 0),
            _soonest(r.get("min_data_loss_margin_seconds")),
            r["topic"],
        ),
    )


def groups_worst_first(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Worst status, then data lost, then the smallest data-loss margin, then the largest lag in
    seconds."""
    return sorted(
        rows,
        key=lambda r: (
            RANK[r["health"]],
            -STATUS_SEVERITY.get(r.get("worst_status") or r.get("status") or "", 0),
            not r.get("data_loss_occurred"),
            _soonest(r.get("data_loss_margin_seconds")),
            -(r.get("max_lag_seconds") or r.get("lag_seconds") or 0),
            r["group_id"],
        ),
    )


def annotate(rows: Iterable[dict[str, Any]], judge: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    """Each row with its `health` added."""
    return [{**row, "health": judge(row)} for row in rows]

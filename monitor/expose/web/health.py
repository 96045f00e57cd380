"""Red, amber, green for the dashboard: what each row of a page counts as, and the worst-first
orders the tables use. On-call engineers look before they read, so every page colours each row
and sorts the worst to the top.

The colours come from the rules, never from thresholds copied here, so the page and the pager
agree and an edited rule moves both:

- a row is red where an open finding (pending or firing) on its entity, or on an entity inside it,
  is critical (it pages), amber where one is a warning (chat and email) (`Flags`); a rule added to
  the rule files colours the rows it matches without a change here;
- the data-loss risk is coloured by TimeUntilDataLoss's own tiers, read from the rule files the
  evaluation uses (`RuleScale`): the margin (`data_loss_margin_seconds`), not the deletion time, so
  a group that keeps up on a short-retention topic is green, as the rule stays quiet. It is read
  from the derived columns, so a partition has its colour before a finding is written for it;
- what is a fact rather than a judgement colours by itself: a broker down, a partition offline or
  under its min ISR (red), under-replicated or short of its retention (amber), a consumer status
  of ERR or worse (red) or WARN (amber), data already lost (red).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from monitor.core.derived import KEYS
from monitor.core.vocabulary import SEVERITY_RANK, STATUS_RANK
from monitor.evaluate.rule_files import rule_files
from monitor.expose.read.dashboard import OpenFinding

if TYPE_CHECKING:
    from monitor.evaluate.rules import Rule

log = logging.getLogger(__name__)

BAD: Final = "bad"
WARN: Final = "warn"
OK: Final = "ok"
RANK: Final = {BAD: 0, WARN: 1, OK: 2}

DATA_LOSS_RULE: Final = "TimeUntilDataLoss"
DATA_LOSS_COLUMN: Final = "data_loss_margin_seconds"
"""The rule whose tiers colour the data-loss risk, and the column they compare."""
LEADER_COLUMNS: Final = frozenset({"leaders", "leader_imbalance", "fair_share_leaders"})
DISK_COLUMNS: Final = frozenset({"disk_used_ratio"})
"""A broker's leader and disk cells (and chart bars) take the findings of the rules that read these."""


def worst(*healths: str) -> str:
    return min(healths, key=RANK.__getitem__, default=OK)


def _below(value: float | None, limit: float) -> bool:
    return value is not None and not math.isnan(value) and value < limit


def severity_health(severity: str | None) -> str:
    """A finding's colour: critical (it pages) red, warning amber, info (or none) green."""
    rank = SEVERITY_RANK.get(severity or "", 0)
    return BAD if rank >= SEVERITY_RANK["critical"] else WARN if rank >= SEVERITY_RANK["warning"] else OK


_SEVERITY_OF_RANK: Final = {rank: name for name, rank in SEVERITY_RANK.items()}


class Flags:
    """The colours the open findings of a cluster give the rows of its pages.

    A row is named by its keys (`group_id`, `topic`, `partition`, `broker_id`, as in
    `monitor.core.derived.KEYS`) and takes the worst severity of the findings on the entity those
    keys name or on an entity inside it: a group's row its topics' and partitions' findings, a
    topic's row its partitions'; a consumer group's findings never colour a topic's row (the
    data-loss margin does that). `reads` (rule -> the columns its conditions read) lets a cell
    take only the findings of the rules about it (a broker's disk, not its leaders)."""

    def __init__(
        self, findings: Iterable[OpenFinding], reads: Mapping[str, frozenset[str]] | None = None
    ) -> None:
        self._reads = reads or {}
        self._index: dict[frozenset[tuple[str, str]], list[tuple[str, int]]] = {}
        for finding in findings:
            keys = KEYS.get(finding.entity, ())
            values = [(k, str(finding.labels.get(k))) for k in keys]
            grouped = [kv for kv in values if kv[0] == "group_id"]
            others = [kv for kv in values if kv[0] != "group_id"]
            rank = SEVERITY_RANK.get(finding.severity, 0)
            for size in range(len(others) + 1):
                for chosen in combinations(others, size):
                    row = frozenset((*grouped, *chosen))
                    if row:
                        self._index.setdefault(row, []).append((finding.rule, rank))

    def health(self, reading: frozenset[str] | None = None, **row: object) -> str:
        """The colour of the row whose keys are `row` (values as the row holds them); with
        `reading`, only the findings of rules that read one of those columns count."""
        found = self._index.get(frozenset((k, str(v)) for k, v in row.items()), [])
        ranks = [
            rank for rule, rank in found if reading is None or reading & self._reads.get(rule, frozenset())
        ]
        return severity_health(_SEVERITY_OF_RANK.get(max(ranks, default=0)))


NO_FLAGS: Final = Flags(())
"""No findings: every row green unless its facts say otherwise."""


def rule_reads(rules: Iterable[Rule]) -> dict[str, frozenset[str]]:
    """Rule name -> the columns its condition and tiers read."""
    import sqlglot  # with the rules, read at the first page that colours a row (not at the start)
    from sqlglot import exp

    reads: dict[str, frozenset[str]] = {}
    for rule in rules:
        texts = [t for t in (rule.condition, *(tier.when for tier in rule.severities)) if t]
        columns: set[str] = set()
        for text in texts:
            try:
                columns |= {c.name for c in sqlglot.parse_one(text, read="spark").find_all(exp.Column)}
            except sqlglot.errors.SqlglotError:  # the rule check refuses it; it reads nothing here
                continue
        reads[rule.name] = frozenset(columns)
    return reads


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
    from monitor.evaluate.rule_sql import upper_bound

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
    """The LossScale of the rule files in `rules_dir` (the project's alert_rules/ when None), and
    the columns each of their rules reads (`reads`), read again when one of them changes: the
    evaluation reloads them every cycle, and the pages follow without a restart. Calls cost a few
    `stat`s. Thread-safe."""

    def __init__(self, rules_dir: Path | None = None) -> None:
        self._dir = rules_dir
        self._lock = threading.Lock()
        self._stamp: tuple[tuple[str, int, int], ...] | None = None
        self._scale = LossScale()
        self._reads: dict[str, frozenset[str]] = {}

    def __call__(self) -> LossScale:
        with self._lock:
            self._refresh()
            return self._scale

    def reads(self) -> Mapping[str, frozenset[str]]:
        """Rule name -> the columns its condition and tiers read (`rule_reads`)."""
        with self._lock:
            self._refresh()
            return self._reads

    def stamped_reads(self) -> tuple[Hashable, Mapping[str, frozenset[str]]]:
        """`reads` with a stamp of the rule files it came from (their paths, times and sizes),
        which changes when they do: a key for what is computed from them."""
        with self._lock:
            self._refresh()
            return self._stamp, self._reads

    def _refresh(self) -> None:
        """Read the rule files again if one changed (the lock held)."""
        try:
            paths = rule_files(self._dir)
            stamp = tuple((str(p), s.st_mtime_ns, s.st_size) for p in paths for s in (p.stat(),))
        except OSError as exc:  # a file removed while it was listed: keep the last scale
            log.warning("cannot read the rule files for the dashboard's colours: %s", exc)
            return
        if stamp != self._stamp:
            from monitor.evaluate.rules import load_rules  # the loader's modules: at the first read

            rules = load_rules(paths).rules
            self._scale, self._reads = loss_scale(rules), rule_reads(rules)
            self._stamp = stamp


def broker(row: dict[str, Any], flags: Flags = NO_FLAGS) -> str:
    """A broker: red when down, else as its findings say."""
    return BAD if not row["up"] else flags.health(broker_id=row["broker_id"])


def broker_cell(up: bool, broker_id: int, columns: frozenset[str], flags: Flags = NO_FLAGS) -> str:
    """A broker's leader or disk cell (or chart bar): red when down, else as the findings of the
    rules reading `columns` say."""
    return BAD if not up else flags.health(columns, broker_id=broker_id)


def status_health(status: str | None) -> str:
    """OK green, WARN amber, ERR and the statuses it covers red; unknown (not evaluated) green."""
    rank = STATUS_RANK.get(status or "", 0)
    return BAD if rank >= STATUS_RANK["ERR"] else WARN if rank >= STATUS_RANK["WARN"] else OK


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


def topic(row: dict[str, Any], loss: LossScale, flags: Flags = NO_FLAGS) -> str:
    """A topic: its replication and retention facts, its findings (and its partitions'), and the
    data-loss margin of the groups reading it."""
    if row.get("offline_partitions") or row.get("under_min_isr_partitions"):
        return BAD
    amber = row.get("under_replicated_partitions") or (row.get("retention_shortfall_seconds") or 0) > 0
    return worst(
        WARN if amber else OK,
        flags.health(topic=row["topic"]),
        loss.health(row.get("min_data_loss_margin_seconds")),
    )


def partition(row: dict[str, Any], loss: LossScale, flagged: str = OK) -> str:
    """A partition on the topic page: replication, retention, the groups reading it, and
    `flagged`, the colour its findings give it (`Flags.health(topic=..., partition=...)`)."""
    offline = row["offline"] or row["leader"] is None  # before its first evaluation too
    if offline or row["under_min_isr"]:
        return BAD
    amber = row["under_replicated"] or (row["retention_shortfall_seconds"] or 0) > 0
    return worst(
        WARN if amber else OK,
        flagged,
        loss.health(row["min_data_loss_margin_seconds"], row["data_loss_occurred"]),
    )


def group(row: dict[str, Any], loss: LossScale, flagged: str = OK) -> str:
    """A consumer group (or its lag on one topic or partition): its status, its data-loss margin,
    and `flagged`, the colour its findings give it (`Flags.health` with the row's keys)."""
    return worst(
        status_health(row.get("worst_status") or row.get("status")),
        loss.health(row.get("data_loss_margin_seconds"), row.get("data_loss_occurred")),
        flagged,
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
            -STATUS_RANK.get(r.get("worst_status") or r.get("status") or "", 0),
            not r.get("data_loss_occurred"),
            _soonest(r.get("data_loss_margin_seconds")),
            -(r.get("max_lag_seconds") or r.get("lag_seconds") or 0),
            r["group_id"],
        ),
    )


def annotate(rows: Iterable[dict[str, Any]], judge: Callable[[dict[str, Any]], str]) -> list[dict[str, Any]]:
    """Each row with its `health` added."""
    return [{**row, "health": judge(row)} for row in rows]

"""`kafka-health status | lag GROUP | topic TOPIC`: the state the dashboard shows, as terminal
tables for an on-call engineer on a shell, or as JSON (`--json`) for scripts.

They read the same records as the pages and the API (`monitor.expose.read`), from the database
the configuration points at. Worst first everywhere: a down broker, an offline partition, the
group closest to losing data.

Names are data: every group, topic, member and error text goes through `printable_markup`, so a
group called `[link=http://x]y[/link]` or one with an escape sequence in it prints as written.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from sqlalchemy import Connection

from monitor.cli.common import ConfigOption, err, open_engine, out
from monitor.core.clock import SystemClock
from monitor.core.errors import ConfigError, MonitorError
from monitor.core.formatting import (
    advice_filter,
    bytes_filter,
    catch_up_filter,
    duration_filter,
    number_filter,
    percent_filter,
    printable_markup,
)
from monitor.core.objectives import BURN_WINDOWS
from monitor.core.settings import load_settings
from monitor.core.vocabulary import BAD_STATUSES, SEVERITY_RANK
from monitor.expose.read import clusters as read_clusters
from monitor.expose.read import lag as read_lag
from monitor.expose.read import queries
from monitor.expose.read import topics as read_topics
from monitor.expose.read.objectives import GroupObjective

ClusterOption = Annotated[
    str | None,
    typer.Option("--cluster", help="The cluster; may be left out when only one cluster has the name."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]


class ReportError(Exception):
    """What the user asked for does not exist, or cannot be read; the message says what to do."""


@contextmanager
def _connection(config: Path | None) -> Iterator[Connection]:
    try:
        engine = open_engine(load_settings(config))
        with engine.connect() as conn:
            yield conn
    except (ConfigError, MonitorError, ReportError) as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)  # names in it are quoted with repr
        raise typer.Exit(2) from exc


def register(app: typer.Typer) -> None:
    """Add the report commands to the top-level command line."""
    app.command("status")(status)
    app.command("lag")(lag)
    app.command("topic")(topic)


# -- the commands ----------------------------------------------------------------------------------


def status(cluster: ClusterOption = None, as_json: JsonOption = False, config: ConfigOption = None) -> None:
    """Every cluster at a glance: brokers down, offline / under-min-ISR / under-replicated
    partitions, groups by status, open findings, and how fresh the numbers are."""
    with _connection(config) as conn:
        states = read_clusters.clusters(conn)
        if cluster is not None:
            states = [s for s in states if s.cluster == cluster]
            if not states:
                raise ReportError(f"no cluster {cluster!r}; known: {_names(read_clusters.clusters(conn))}")
        brokers = {s.cluster: read_clusters.brokers(conn, s.cluster) for s in states}
        runs = [r for r in queries.last_runs(conn) if cluster is None or r["cluster"] in (cluster, None)]
    if as_json:
        _json({"clusters": states, "brokers": brokers, "collection": runs})
        return
    if not states:
        out.print("No cluster collected yet: is the daemon running (`kafka-health run`)?")
        return
    now = SystemClock().now()
    table = Table(title="Clusters")
    for column in ("cluster", "brokers", "offline", "under min ISR", "under-replicated", "groups",
                   "findings", "data as of"):  # fmt: skip
        table.add_column(column)
    for s in states:
        down = [str(b.broker_id) for b in brokers[s.cluster] if not b.up]
        table.add_row(
            _text(s.cluster),
            _mark(f"{s.brokers_up} up" + (f", down: {', '.join(down)}" if down else ""), bool(down)),
            _mark(_count(s.offline_partitions), bool(s.offline_partitions)),
            _mark(_count(s.under_min_isr_partitions), bool(s.under_min_isr_partitions)),
            _mark(_count(s.under_replicated_partitions), bool(s.under_replicated_partitions), "yellow"),
            _groups(s),
            _findings(s.findings_by_severity),
            _age(s.evaluated_at, now),
        )
    out.print(table)
    failing = [r for r in runs if r["status"] not in ("ok", "running")]
    if failing:
        runs_table = Table(title="Collection problems (newest run per cluster and job)")
        for column in ("cluster", "job", "started", "status", "error"):
            runs_table.add_column(column, overflow="fold")
        for r in failing:
            runs_table.add_row(_text(r["cluster"] or "-"), _text(r["job"]), _time(r["started_at"]),
                               _mark(r["status"], True), _text(r["error"] or ""))  # fmt: skip
        out.print(runs_table)


def lag(
    group: Annotated[str, typer.Argument(help="The consumer group id.")],
    cluster: ClusterOption = None,
    lagging: Annotated[bool, typer.Option("--lagging", help="Only partitions with lag.")] = False,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """A consumer group's lag: status, members, lag in offsets and seconds per topic and per
    partition, time until data loss, the catch-up forecast and the consumer advice, and the lag
    objectives it is held to (budget left, burn rates)."""
    with _connection(config) as conn:
        name = _cluster_of(conn, cluster, group, read_lag.group_ids, "consumer group")
        detail = read_lag.group(conn, name, group)
        if detail is None:
            raise ReportError(f"no consumer group {group!r} in the newest evaluation of {name!r}")
        partitions = read_lag.group_partitions(conn, name, group, lagging=lagging, page=queries.ALL)
    if as_json:
        _json({"cluster": name, **dataclasses.asdict(detail), "partitions": partitions.items})
        return
    g = detail.group
    bad = (g.status or "") in BAD_STATUSES or bool(g.data_loss_occurred)
    loss, margin = g.time_until_data_loss_seconds, g.data_loss_margin_seconds
    line = [
        f"[bold]{_text(group)}[/] on {_text(name)}: status {_mark(g.status or 'unknown', bad)}",
        f"state {_text(g.group_state)}, {g.members or 0} member(s)",
        f"lag {number_filter(g.offset_lag)} messages, {duration_filter(g.lag_seconds)}",
        catch_up_filter(
            g.offset_lag,
            g.consume_rate,
            g.produce_rate,
            g.time_to_catch_up_seconds,
            g.catch_up_low_seconds,
            g.catch_up_high_seconds,
        )
        + _text(
            advice_filter(
                g.members,
                g.consumers_needed,
                g.advice_limited_by,
                g.hot_topic,
                g.hot_partition,
                g.offset_lag,
                g.time_until_data_loss_seconds,
            )
        ),
        f"time until data loss {duration_filter(loss) if loss is not None else '-'}"
        + (" (not at risk)" if margin is None else f" (margin {_mark(duration_filter(margin), True)})"),
    ]
    if g.data_loss_occurred:
        line.append("[red bold]DATA LOST[/]")
    out.print("; ".join(line), highlight=False)
    table = Table(title=f"{len(partitions.items)} partition(s), data as of {_time(partitions.evaluated_at)}")
    for column in ("topic", "partition", "committed", "end", "lag", "lag time", "method", "append lag",
                   "commit lag", "until data loss", "status", "owner"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for p in partitions.items:
        table.add_row(
            _text(p.topic), str(p.partition), _count(p.committed_offset), _count(p.end_offset),
            _count(p.offset_lag), duration_filter(p.lag_seconds), _text(p.lag_seconds_method or "-"),
            duration_filter(p.append_lag_seconds), duration_filter(p.commit_lag_seconds),
            duration_filter(p.time_until_data_loss_seconds) if p.time_until_data_loss_seconds is not None
            else "-",
            _mark(p.status or "-", (p.status or "") in BAD_STATUSES), _text(p.owner or "unassigned"),
        )  # fmt: skip
    out.print(table)
    if detail.objectives:
        out.print(_objectives(detail.objectives))


def _objectives(objectives: Sequence[GroupObjective]) -> Table:
    """The group's lag objectives as the group page shows them: a burn rate of 1 spends the error
    budget exactly over the objective's window."""
    table = Table(title="Lag objectives (burn rate 1 = the budget spent exactly over the window)")
    burns = [w.label for w in BURN_WINDOWS]
    for column in ("objective", "lag at most", "target", "window", *(f"burn {b}" for b in burns),
                   "bad minutes", "compliance", "budget left"):  # fmt: skip
        table.add_column(column, overflow="fold")
    for o in objectives:
        rates = [getattr(o, w.column) for w in BURN_WINDOWS]
        table.add_row(
            _text(o.objective) + (" (bad this minute)" if o.minute_bad else ""),
            duration_filter(o.lag_threshold_seconds), f"{o.target:g} %", f"{o.window_days} d",
            *("-" if r is None else _mark(f"{number_filter(r, 1)}x", r >= 1, "yellow") for r in rates),
            f"{_count(o.bad_minutes)} of {_count(o.recorded_minutes)}",
            "-" if o.compliance is None else f"{number_filter(o.compliance, 2)} %",
            _mark(f"{number_filter(o.budget_remaining * 100, 1)} %", o.budget_remaining <= 0),
        )  # fmt: skip
    return table


def topic(
    name: Annotated[str, typer.Argument(help="The topic.")],
    cluster: ClusterOption = None,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """A topic: retention (size vs retention.bytes, time coverage vs retention.ms, shortfall),
    replication per partition, and the groups reading it, soonest data loss first."""
    with _connection(config) as conn:
        where = _cluster_of(conn, cluster, name, read_topics.topic_names, "topic")
        detail = read_topics.topic(conn, where, name, page=queries.ALL)
        if detail is None:
            raise ReportError(f"no topic {name!r} in cluster {where!r}")
    if as_json:
        _json({"cluster": where, **dataclasses.asdict(detail)})
        return
    t = detail.topic
    line = [
        f"[bold]{_text(name)}[/] on {_text(where)}: {t.partitions} partition(s), RF {t.replication_factor}, "
        f"cleanup.policy {_text(t.cleanup_policy)}",
        f"retention.ms {_retention_ms(t.retention_ms)}, retention.bytes "
        + (bytes_filter(t.retention_bytes) if t.retention_bytes else "unlimited"),
        f"size {bytes_filter(t.size_bytes)}, fullest partition at {percent_filter(t.max_size_ratio)} "
        f"of retention.bytes, shortest time coverage {duration_filter(t.min_time_coverage_seconds)}",
    ]
    if t.retention_shortfall_seconds:
        line.append(f"[red bold]retention shortfall {duration_filter(t.retention_shortfall_seconds)}[/]")
    out.print("; ".join(line), highlight=False)
    parts = Table(title=f"Partitions, data as of {_time(t.evaluated_at)}")
    for column in ("partition", "leader", "replicas", "ISR", "lost", "size", "of retention.bytes",
                   "coverage", "until data loss"):  # fmt: skip
        parts.add_column(column)
    for p in detail.partitions.items:
        parts.add_row(
            str(p.partition), _mark(str(p.leader) if p.leader is not None else "OFFLINE", p.leader is None),
            ",".join(map(str, p.replicas)), ",".join(map(str, p.isr)),
            _mark(_count(p.replicas_lost), bool(p.replicas_lost)), bytes_filter(p.size_bytes),
            percent_filter(p.size_ratio) if p.size_ratio is not None else "-",
            duration_filter(p.time_coverage_seconds),
            duration_filter(p.min_time_until_data_loss_seconds)
            if p.min_time_until_data_loss_seconds is not None else "-",
        )  # fmt: skip
    out.print(parts)
    readers = Table(title="Consumer groups")
    for column in ("group", "status", "lag", "lag time", "until data loss"):
        readers.add_column(column)
    for c in detail.consumers:
        readers.add_row(
            _text(c.group_id), _mark(c.status or "-", (c.status or "") in BAD_STATUSES), _count(c.offset_lag),
            duration_filter(c.lag_seconds),
            duration_filter(c.time_until_data_loss_seconds)
            if c.time_until_data_loss_seconds is not None else "-",
        )  # fmt: skip
    out.print(readers if detail.consumers else "No consumer group reads this topic.")


# -- helpers ---------------------------------------------------------------------------------------


def _cluster_of(conn: Connection, cluster: str | None, name: str, known: Any, what: str) -> str:
    """The cluster `name` lives in: `cluster` when given (and known), else the only one that has it."""
    clusters = [s.cluster for s in read_clusters.clusters(conn)]
    if cluster is not None:
        if cluster not in clusters:
            raise ReportError(f"no cluster {cluster!r}; known: {', '.join(clusters) or 'none yet'}")
        return cluster
    having = [c for c in clusters if name in known(conn, c)]
    if len(having) == 1:
        return having[0]
    if not having:
        raise ReportError(
            f"no {what} {name!r} in any cluster ({', '.join(clusters) or 'none collected yet'})"
        )
    raise ReportError(f"{what} {name!r} is in clusters {', '.join(having)}: choose one with --cluster")


def _names(states: Sequence[read_clusters.ClusterState]) -> str:
    return ", ".join(s.cluster for s in states) or "none yet"


def _groups(s: read_clusters.ClusterState) -> str:
    by_status = ", ".join(f"{n} {status}" for status, n in sorted(s.groups_by_status.items()))
    text = f"{s.consumer_groups} ({by_status})" if by_status else str(s.consumer_groups)
    return _mark(text, any(st in BAD_STATUSES for st in s.groups_by_status))


def _findings(by_severity: dict[str, int]) -> str:
    ordered = sorted(by_severity.items(), key=lambda item: (-SEVERITY_RANK.get(item[0], 0), item[0]))
    text = ", ".join(f"{n} {severity}" for severity, n in ordered)
    return _mark(text, "critical" in by_severity) if text else "none"


def _text(value: object) -> str:
    """A name or message from Kafka, the database or the user, as literal text in Rich markup."""
    return printable_markup(value)


def _mark(text: str, bad: bool, colour: str = "red") -> str:
    return f"[{colour} bold]{_text(text)}[/]" if bad else _text(text)


def _count(value: int | None) -> str:
    return "-" if value is None else number_filter(value)


def _retention_ms(value: int | None) -> str:
    return "unlimited" if value is None or value < 0 else duration_filter(value / 1000)


def _time(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S %Z") if value else "never"


def _age(value: datetime | None, now: datetime) -> str:
    if value is None:
        return "not evaluated yet"
    return f"{_time(value)} ({duration_filter((now - value).total_seconds())} ago)"


def _json(payload: Any) -> None:
    print(json.dumps(payload, default=_plain, indent=2, sort_keys=True))


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"cannot write {type(value).__name__} as JSON")

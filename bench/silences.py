"""What silences cost the alert cycle: many active silences over many firing alerts, through the
real cycle on PostgreSQL, and what costly regular expressions cost before and after they were
bounded.

    .venv/bin/python bench/silences.py                      # a private server under var/bench/
    .venv/bin/python bench/silences.py --port 40100 --silences 1000 --alerts 10000

Without --url, a project-local PostgreSQL is started on 127.0.0.1:55469 (data under
var/bench/postgres-silences) and stopped at the end if this script started it; a scratch database
is created, migrated and dropped afterwards.

1. Many silences: N firing findings of consumer groups over 20 teams (labels cluster, topic,
   group_id, team: `team-07.consumer-group-3`, `team-07.events-123`; a costly pattern's cost
   grows with the label's length), and S silences made through
   `monitor.alert.actions.create_silence` (the API's, the form's and the CLI's one way in), S /
   20 per team, of five kinds: a group by name, a group by pattern, a pattern with a topic that
   is not, a negative pattern with a cluster, and a rule pattern with a group pattern and a
   cluster that is not. Three alert cycles (`run_cycle` with the shipped routing, each one
   transaction, commit included): the first creates the alerts and incidents, the second (30 s
   later) decides the first notices, the third is steady. The time of the silence step alone
   (`apply_silences`) is taken inside each cycle. The same three cycles without any silence give
   the baseline.
2. Costly silences: 20 silences of one team with `group_id=~(?:.?){999}.*(?:.?){999}` (which the
   API now refuses: they are written into the table as if stored before the limit) and 30
   ordinary ones, over the same alerts. Matching alone, on the alerts of the cycle: each silence's
   matchers against each alert as before (the limit lifted, so the patterns compile), all at once
   with the limit lifted, and as the cycle now does (the costly ones ignored). Then the real cycle.

Prints Markdown tables on stdout (and to bench/results/silences.md, the figures in
silences.json); progress goes to stderr.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `bench.alerts`

from bench.alerts import memory_text, on_server, scratch_database, server_parser
from monitor.alert import actions, cycle
from monitor.alert.alerts import AlertRow
from monitor.alert.config import default_routing_paths, load_routing
from monitor.alert.matchers import matches_all, parse_matchers
from monitor.alert.mute.silence import SilenceIndex, SilenceRow, apply_silences
from monitor.core import patterns
from monitor.core.identity import Identity

BENCH_PORT = 55469
RESULTS = Path(__file__).resolve().parent / "results"
T0 = datetime(2031, 6, 1, tzinfo=UTC)
TEAMS = 20
COSTLY = "(?:.?){999}.*(?:.?){999}"
PLATFORM = Identity("bench", frozenset({"kafka-platform"}), "cli")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


GROUPS = 100
"""Consumer groups, GROUPS / TEAMS per team, each with its partitions' alerts."""
TOPICS = 500


def _labels(n: int) -> dict[str, str]:
    """The n-th alert's labels: a partition of one of a team's groups."""
    group = n % GROUPS
    team = group % TEAMS
    return {"cluster": f"c-{group % 4}", "group_id": f"team-{team:02d}.consumer-group-{group // TEAMS}",
            "team": f"team-{team:02d}", "topic": f"team-{team:02d}.events-{n % TOPICS:03d}",
            "partition": str(n // TOPICS)}  # fmt: skip


def _insert_findings(engine: Engine, count: int) -> None:
    rows = []
    for n in range(count):
        labels = _labels(n)
        key = "/".join(labels[k] for k in ("cluster", "group_id", "topic", "partition"))
        rule = "ConsumerAppendLag" if n % 3 else "ConsumerGroupStatus"
        rows.append({"key": key, "cluster": labels["cluster"], "labels": json.dumps(labels), "rule": rule})
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO findings (rule, entity, entity_key, cluster, labels, severity, value, summary,"
                " description, annotations, for_seconds, state, first_seen, last_seen, evaluated_at)"
                " VALUES (:rule, 'group', :key, :cluster, CAST(:labels AS jsonb), 'warning', 1, 'behind', '',"
                " '{}'::jsonb, 0, 'firing', :now, :now, :now)"
            ),
            [{**row, "now": T0} for row in rows],
        )


def silence_matchers(n: int) -> list[str]:
    """The n-th silence: its team's, one of five kinds (a share of the team's alerts match)."""
    team, k = n % TEAMS, n // TEAMS
    kinds = [
        [f"group_id=team-{team:02d}.consumer-group-x{k}"],
        [f"topic=~team-{team:02d}.events-{k % 50:02d}[0-9]"],
        [f"topic!=team-{team:02d}.events-000", f"group_id=~team-{team:02d}.consumer-group-[0-{k % 2}]"],
        [f"group_id!~team-{team:02d}.consumer-group-.*", f"cluster=c-{k % 4}"],
        ["rule=~Consumer.*", f"topic=~team-{team:02d}.events-{k % 5}[0-9]+", "cluster!=c-3"],
    ]
    return [f"team=team-{team:02d}", *kinds[k % len(kinds)]]


def _create_silences(engine: Engine, count: int) -> None:
    with engine.begin() as conn:
        for n in range(count):
            actions.create_silence(
                conn, PLATFORM, matchers=silence_matchers(n), comment="bench", now=T0 - timedelta(minutes=1),
                duration=timedelta(days=1), max_duration=timedelta(days=7), platform_teams={"kafka-platform"},
            )  # fmt: skip


def _store_silences(engine: Engine, matchers: list[list[str]]) -> None:
    """Silences written as they were stored before today's bounds (no check)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO silences (matchers, starts_at, ends_at, created_by, comment, created_at)"
                " VALUES (CAST(:m AS jsonb), :s, :e, 'bench', 'stored before the limit', :s)"
            ),
            [
                {"m": json.dumps(m), "s": T0 - timedelta(minutes=1), "e": T0 + timedelta(days=1)}
                for m in matchers
            ],
        )


def _reset(engine: Engine, silences_only: bool = False) -> None:
    with engine.begin() as conn:
        tables = (
            "silences"
            if silences_only
            else "findings, alerts, alert_groups, acks, silences, notification_outbox"
        )
        conn.execute(text(f"TRUNCATE {tables}"))


@contextmanager
def _timed_silences(spent: list[float]) -> Iterator[None]:
    """Adds the time of each cycle's silence step to `spent`."""
    real = cycle.apply_silences

    def timed(alerts: Any, silences: Any) -> None:
        started = time.perf_counter()
        real(alerts, silences)
        spent.append(time.perf_counter() - started)

    cycle.apply_silences = timed
    try:
        yield
    finally:
        cycle.apply_silences = real


def _cycles(engine: Engine) -> dict[str, Any]:
    """The three cycles (first, notifying, steady): seconds, silence step seconds, muted alerts."""
    routing = load_routing(*default_routing_paths())
    seconds, cpu, matching = [], [], []
    with _timed_silences(matching):
        for step in range(3):
            started, used = time.perf_counter(), time.process_time()
            with engine.begin() as conn:
                result = cycle.run_cycle(conn, routing, T0 + timedelta(seconds=30 * step), "http://x")
            seconds.append(time.perf_counter() - started)
            cpu.append(time.process_time() - used)
    counts = result.alerts
    return {"first": seconds[0], "notify": seconds[1], "steady": seconds[2], "matching": max(matching),
            "cpu": {"first": cpu[0], "notify": cpu[1], "steady": cpu[2]},
            "silenced": counts.get("silenced", 0), "firing": counts.get("firing", 0)}  # fmt: skip


def bench_many(engine: Engine, silences: int, alerts: int) -> dict[str, Any]:
    _reset(engine)
    _insert_findings(engine, alerts)
    _log(f"  {alerts:,} alerts without silences")
    baseline = _cycles(engine)
    _reset(engine)
    _insert_findings(engine, alerts)
    _create_silences(engine, silences)
    _log(f"  {alerts:,} alerts with {silences:,} silences")
    return {"silences": silences, "alerts": alerts, **_cycles(engine), "baseline": baseline}


def _alert_rows(engine: Engine) -> list[AlertRow]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT fingerprint, labels FROM alerts WHERE state = 'firing'")).all()
    return [AlertRow(id=None, fingerprint=r.fingerprint, rule="", cluster="", entity="", entity_key="",
                     labels=dict(r.labels), severity="", state="firing", summary="", description="",
                     value=None, annotations={}, pending_since=T0, starts_at=T0) for r in rows]  # fmt: skip


def _first_matches(index: SilenceIndex, rows: list[AlertRow]) -> list[int | None]:
    return [index.first_match(r.labels) for r in rows]


def _seconds(work: Callable[[], object]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def bench_costly(engine: Engine, alerts: int, costly: int, others: int) -> dict[str, Any]:
    """Matching alone before (one silence after the other) and after (all at once), then the cycle."""
    _reset(engine)
    _insert_findings(engine, alerts)
    stored = [["team=team-00", f"group_id=~{COSTLY}"]] * costly + [silence_matchers(n) for n in range(others)]
    _store_silences(engine, stored)
    routing = load_routing(*default_routing_paths())
    _log("  the real cycle, the first over these alerts (each matched against every silence)")
    started = time.perf_counter()
    with engine.begin() as conn:
        cycle.run_cycle(conn, routing, T0, "http://x")
    cycle_after = time.perf_counter() - started
    rows = _alert_rows(engine)
    limit = patterns.MAX_PROGRAM_SIZE
    patterns.MAX_PROGRAM_SIZE = 1 << 30  # as before the limit: the costly patterns compile
    try:
        parsed = [(n + 1, parse_matchers(m)) for n, m in enumerate(stored)]
        _log(f"  {costly} costly + {others} silences, {len(rows):,} alerts: one silence after the other")
        before = _seconds(
            lambda: [next((i for i, ms in parsed if matches_all(ms, r.labels)), None) for r in rows]
        )
        _log("  all at once, without the limit")
        at_once = _seconds(lambda: _first_matches(SilenceIndex(parsed), rows))
    finally:
        patterns.MAX_PROGRAM_SIZE = limit
    _log("  as the cycle now does")
    silences = [SilenceRow(n + 1, tuple(m)) for n, m in enumerate(stored)]
    after = _seconds(lambda: apply_silences(rows, silences))
    return {"alerts": len(rows), "costly": costly, "others": others, "before": before,
            "at_once_unbounded": at_once, "after": after, "cycle_after": cycle_after}  # fmt: skip


def _machine(loadavg_start: float) -> dict[str, Any]:
    return {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory": memory_text(), "system": f"{platform.system()} {platform.machine()}",
        "python": platform.python_version(), "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": loadavg_start, "loadavg_end": os.getloadavg()[0],
    }  # fmt: skip


def _cpu(cpu: dict[str, float] | None) -> str:
    """First, notifying, steady cycle: CPU seconds of this process (PostgreSQL's not counted)."""
    return ", ".join(f"{cpu[k]:.2f}" for k in ("first", "notify", "steady")) if cpu else "-"


def report(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        "## Silences in the alert cycle",
        "",
        f"Machine: {m['cpus']} CPU, {m['memory']} RAM, {m['system']}, Python {m['python']}, {m['date']}, "
        f"1-minute load average {m['loadavg_start']:.1f} at the start, {m['loadavg_end']:.1f} at the end.",
        "",
        "| silences | firing alerts | first cycle s | notifying cycle s | steady cycle s | silence step s "
        "| silenced | without silences: first / notifying / steady s | process CPU s: with / without |",
        "|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for c in doc["many"]:
        b = c["baseline"]
        without = f"{b['first']:.2f} / {b['notify']:.2f} / {b['steady']:.2f}"
        cpu = " / ".join(_cpu(x.get("cpu")) for x in (c, b))
        lines.append(
            f"| {c['silences']:,} | {c['alerts']:,} | {c['first']:.2f} | {c['notify']:.2f} "
            f"| {c['steady']:.2f} | {c['matching']:.3f} | {c['silenced']:,} | {without} | {cpu} |"
        )
    k = doc.get("costly")
    if k:
        lines += [
            "",
            f"{k['costly']} silences with `group_id=~{COSTLY}` (one team's) and {k['others']} ordinary ones, "
            f"over {k['alerts']:,} firing alerts: the time to match every alert.",
            "",
            "| matching | s |",
            "|---|---:|",
            f"| before: each silence's matchers against each alert | {k['before']:.2f} |",
            f"| all at once, one RE2 set per label, without the size limit | {k['at_once_unbounded']:.3f} |",
            f"| now: the costly patterns refused (stored ones ignored), all at once | {k['after']:.3f} |",
            f"| now: the whole alert cycle (the first over these alerts) | {k['cycle_after']:.2f} |",
        ]
    return "\n".join(lines)


def bench(admin_url: str, silences: list[int], alerts: int, costly: int) -> dict[str, Any]:
    loadavg_start = os.getloadavg()[0]
    with scratch_database(admin_url) as engine:
        many = []
        for count in silences:
            _log(f"{count:,} silences over {alerts:,} firing alerts")
            many.append(bench_many(engine, count, alerts))
        _log("costly silences")
        costly_case = bench_costly(engine, alerts, costly, 30) if costly else None
    return {"machine": _machine(loadavg_start), "many": many, "costly": costly_case}


def _publish(doc: dict[str, Any]) -> None:
    text_report = report(doc)
    print(text_report)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "silences.md").write_text(text_report + "\n")
    (RESULTS / "silences.json").write_text(json.dumps(doc, indent=2) + "\n")


def main() -> int:
    parser = server_parser(__doc__, BENCH_PORT)
    parser.add_argument("--silences", type=int, nargs="+", default=[100, 1_000],
                        help="active silences per run (default 100 1000)")  # fmt: skip
    parser.add_argument("--alerts", type=int, default=10_000, help="firing alerts (default 10000)")
    parser.add_argument(
        "--costly", type=int, default=20, help="costly silences, 0: skip that part (default 20)"
    )
    args = parser.parse_args()
    if min(args.silences) < 0 or args.alerts < 1 or args.costly < 0:
        parser.error("--silences and --costly must be at least 0, --alerts at least 1")
    if max(args.silences) > TEAMS * 100:
        parser.error(f"at most {TEAMS * 100} silences: {TEAMS} teams of at most 100 (the default cap)")
    _publish(on_server(args.url, args.port, "postgres-silences",
                       lambda url: bench(url, args.silences, args.alerts, args.costly)))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

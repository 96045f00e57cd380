"""The results table of every benchmark: one row per benchmark, input size and cost, read from the
JSON each script writes into bench/results/.

Each reader takes one script's document as that script writes it and returns `Row`s; a missing
file gives no rows, and a size that failed gives a row that says so. The targets are the ones the
scripts check (see bench/README.md).
"""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
UNCOMMITTED = "+changes"
"""What `code_commit` adds to HEAD's hash when the code measured is not HEAD's."""


def code_commit(root: Path = ROOT) -> str:
    """The commit of the code a benchmark measures: HEAD's short hash, with "+changes" when the
    code in the working tree (monitor/, bench/) is not HEAD's, so that a run of code not yet
    committed is not recorded under the commit before it. `root`: the repository (this one)."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=root, check=False
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "diff", "--quiet", "HEAD", "--", "monitor", "bench"],
        capture_output=True,
        cwd=root,
        check=False,
    )
    return f"{head}{UNCOMMITTED}" if head and changed.returncode == 1 else head


INGEST_TARGET = 50_000.0
"""Sample ingest: at least 50,000 rows/s through write_offsets_batch."""
EVALUATE_TARGET = (1_000_000, 30.0)
"""bench/evaluate.py's target (issue 16): 1M group-partitions evaluated in at most 30 s."""
ALERT_CYCLE_TARGET = (10_000, 5.0)
"""bench/alerts.py's: 10k firing findings grouped and routed in one cycle in under 5 s."""
SENDER_TARGET = 200.0
"""bench/alerts.py's: at least 200 notifications/s."""
SILENCES_TARGET = (1_000, 10_000, 1.0)
"""bench/silences.py's (issue 26): with 1,000 active silences over 10,000 firing alerts, an alert
cycle that matches every alert (the first and the steady one) within 1 s."""
WEB_TARGET = (10_000, 500.0, 1_048_576)
"""bench/web.py's (issue 17): at 10,000 topics, the pages and the API answer within 500 ms at the
95th percentile with 16 clients, and no page or list is over 1 MB."""
WEB_TARGET_KINDS = ("page", "api")
SCRAPE_TARGET = (10_000, 300.0, 1_000.0)
"""`bench/web.py --only metrics --output metrics` (issue 17): at 10,000 topics one scrape within
300 ms (its p95 alone), and 4 concurrent scrapers within 1 s at the 95th percentile."""
PUSH_TARGET = (100_000, 15.0)
"""bench/push.py's (issue 17): remote write of 100,000 series within one 15 s cycle."""
FRESH_VISIBLE_TARGET = (100_000, 1.0)
"""bench/fresh_visible.py's (issue 31): at 100,000 group-partitions a commit shows in the API and
the Burrow endpoint within 1 s at the median."""
DETECT_BEYOND_FOR = 20.0
"""bench/detect.py's (issue 16): fault -> notice accepted, at most 20 s beyond the rule's `for:`."""
DETECT_IDLE_CPU = 6.0
"""Issue 16: the daemon and its Spark JVM at idle on a small cluster, CPU-seconds per minute."""
DETECT_EVALUATION = (2.0, 4.0)
"""Issue 16: a warm evaluation of a small cluster, median and p95 seconds."""


@dataclass(frozen=True)
class Row:
    benchmark: str
    input: str
    """The input's size in words, e.g. `10,000 partitions, 500 groups`."""
    size: float
    """The input's size as a number (the x of the plots)."""
    cost: str
    value: float | None
    """None when the measurement failed (`note` says why)."""
    unit: str
    target: str = ""
    met: bool | None = None
    measured: str = ""
    load: float | None = None
    note: str = ""
    shown: str = ""
    """What the table shows instead of a missing value (e.g. `> 8,000` when nothing answered in 8 s)."""


def _median(values: list[float]) -> float:
    return float(statistics.median(values))


def ingest_rows(doc: dict[str, Any]) -> list[Row]:
    machine = doc.get("machine", {})
    return [
        Row(
            "ingest", f"{s['rows']:,} rows per batch", s["rows"], "write_offsets_batch rows/s (median)",
            s["median_rate"], "rows/s", f">= {INGEST_TARGET:,.0f}/s", s["median_rate"] >= INGEST_TARGET,
            machine.get("date", ""), machine.get("loadavg_start"),
            f"idempotent replay {s['replay_rate']:,.0f}/s",
        )
        for s in doc.get("sizes", [])
    ]  # fmt: skip


def collector_rows(doc: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for s in doc.get("sizes", []):
        label = f"{s['partitions']:,} partitions, {s.get('groups', 0):,} groups"
        when = s.get("measured_at", doc.get("machine", {}).get("date", ""))
        if s.get("error") or not s.get("cycles"):
            rows.append(
                Row(
                    "collector",
                    label,
                    s["partitions"],
                    "offsets cycle s",
                    None,
                    "s",
                    measured=when,
                    note=f"failed: {s.get('error', 'no cycles')}",
                )
            )
            continue
        cycles = cycle_seconds(s)
        load = max((c.get("loadavg") or 0.0) for c in s["cycles"])
        target = "< 10 s at 10k partitions" if s["partitions"] == 10_000 else ""
        cold, warm = cycles[0], cycles[-1]
        rows.append(
            Row(
                "collector",
                label,
                s["partitions"],
                "offsets cycle s (cold)",
                cold,
                "s",
                target,
                cold < 10 if target else None,
                when,
                load,
            )
        )
        rows.append(
            Row(
                "collector",
                label,
                s["partitions"],
                f"offsets cycle s (warm, cycle {len(cycles)})",
                warm,
                "s",
                target,
                warm < 10 if target else None,
                when,
                load,
            )
        )
        hundred_k = s.get("group_partitions_committed") == 100_000
        peak = s.get("memory", {}).get("peak_mb")
        if peak is not None:
            rss_target, rss_limit = (
                ("<= 300 MB at 100k group-partitions", 300) if hundred_k else ("< 500 MB", 500)
            )
            rows.append(
                Row("collector", label, s["partitions"], "collector peak RSS MB", peak, "MB", rss_target,
                    peak <= rss_limit if hundred_k else peak < rss_limit, when, load)
            )  # fmt: skip
        rows += _stream_rows(s, label, when, load, hundred_k)
    return rows


def _stream_rows(s: dict[str, Any], label: str, when: str, load: float, hundred_k: bool) -> list[Row]:
    """The cold start, commit latency, steady cost and steady cycles of a size that measured them,
    against the targets at 100,000 group-partitions (issue cases of bench/collector.py)."""
    cold, steady = s.get("cold") or {}, s.get("steady") or {}
    visible = steady.get("commit_visible") or {}
    cycles = steady.get("cycles") or []
    label = f"{label}, {s.get('group_partitions_committed', 0):,} group-partitions"
    measured: list[tuple[str, float | None, str, str, float | None, str]] = [
        ("first complete answer s", cold.get("first_complete_seconds"), "s", "<= 2.5 s", 2.5,
         f"append times filled after {cold.get('filled_seconds') or 0:.1f} s"),
        ("commit visible s (median)", visible.get("median_seconds"), "s", "<= 1 s", 1.0,
         f"p95 {visible.get('p95_seconds') or 0:.2f} s (target 2 s), {visible.get('unseen', 0)} unseen"),
        ("steady CPU-s per minute", steady.get("cpu_per_minute"), "CPU-s", "<= 3", 3.0, ""),
        ("steady offsets cycle s (slowest)", max(cycles) if cycles else None, "s", "<= 2 s", 2.0,
         ", ".join(f"{c:.2f}" for c in cycles)),
    ]  # fmt: skip
    rows = []
    for cost, value, unit, target, limit, note in measured:
        if value is None:
            continue
        met = value <= limit if hundred_k and limit is not None else None
        shown_target = target if hundred_k else ""
        rows.append(
            Row("collector", label, s["partitions"], cost, value, unit, shown_target, met, when, load, note)
        )  # fmt: skip
    return rows


def cycle_seconds(size: dict[str, Any]) -> list[float]:
    """Each cycle's time: the median over the repeated runs when there were several."""
    runs = [r["seconds"] for r in size.get("runs", []) if r.get("seconds")]
    if len(runs) > 1:
        return [_median([run[i] for run in runs]) for i in range(min(len(r) for r in runs))]
    return [c["seconds"] for c in size["cycles"]]


def evaluate_run(size: dict[str, Any]) -> dict[str, Any]:
    """The run with the median wall time (as bench/evaluate.py reports it)."""
    runs = sorted(size["runs"], key=lambda r: r["wall_s"])
    return dict(runs[len(runs) // 2])


def evaluate_rows(doc: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for s in doc.get("sizes", []):
        # Sizes merged from earlier runs (evaluate.py --merge) carry their own date.
        when = (s.get("measured") or {}).get("date") or doc.get("machine", {}).get("date", "")
        label = f"{s['rows']:,} group-partitions"
        if s.get("error") or not s.get("runs"):
            rows.append(
                Row(
                    "evaluate",
                    label,
                    s["rows"],
                    "evaluation s",
                    None,
                    "s",
                    measured=when,
                    note=f"failed: {s.get('error', 'no timed run')}",
                )
            )
            continue
        run = evaluate_run(s)
        split = ", ".join(f"{k} {v:.1f}" for k, v in run["seconds"].items())
        at_target = s["rows"] == EVALUATE_TARGET[0]
        target = f"<= {EVALUATE_TARGET[1]:g} s at 1M" if at_target else ""
        rows.append(
            Row(
                "evaluate",
                label,
                s["rows"],
                "evaluation s (read + compute + write)",
                run["wall_s"],
                "s",
                target,
                run["wall_s"] <= EVALUATE_TARGET[1] if at_target else None,
                when,
                run.get("loadavg_before"),
                split,
            )
        )
    return rows


INCREMENTAL_TARGETS = {
    (100_000, 1.0): ("<= 1 s at 100k", 1.0),
    (1_000_000, 1.0): ("<= 1.5 s at 1M, 1 % moved", 1.5),
    (1_000_000, 10.0): ("<= 10 s at 1M, 10 % moved", 10.0),
}
"""Issue 31's targets of an incremental run, by (group-partitions, percentage of the groups moved)."""


def evaluate_still_rows(doc: dict[str, Any]) -> list[Row]:
    """bench/evaluate.py --still: the daemon's (incremental) evaluation of a still fleet of which a
    few groups moved before each run."""
    rows: list[Row] = []
    for s in doc.get("sizes", []):
        percent = float(s.get("still", doc.get("still")) or 0)
        if s.get("error") or not s.get("runs"):
            continue
        when = (s.get("measured") or {}).get("date") or doc.get("machine", {}).get("date", "")
        run = evaluate_run(s)
        groups = s.get("groups") or 0
        target, limit = INCREMENTAL_TARGETS.get((s["rows"], percent), ("", None))
        cpu = run.get("cpu_s") or {}
        seconds = run["seconds"]
        note = (
            f"{run.get('moved_groups') or 0} of {groups:,} groups moved, {run.get('carried_groups') or 0:,} "
            f"carried; compute {seconds.get('compute', 0):.1f}, write {seconds.get('write', 0):.1f} s; "
            f"CPU-s JVM {cpu.get('jvm') or 0:.1f}, PostgreSQL {cpu.get('postgresql') or 0:.1f}"
        )
        rows.append(
            Row(
                "evaluate-still", f"{s['rows']:,} group-partitions, still, {percent:g} % of pairs moved",
                s["rows"], "incremental evaluation s", run["wall_s"], "s", target,
                run["wall_s"] <= limit if limit is not None else None, when, run.get("loadavg_before"), note,
            )
        )  # fmt: skip
    return rows


def alerts_rows(doc: dict[str, Any]) -> list[Row]:
    machine = doc.get("machine", {})
    when, load = machine.get("date", ""), machine.get("loadavg_start")
    rows: list[Row] = []
    for c in doc.get("cycles", []):
        label = f"{c['findings']:,} firing findings"
        slowest = max(c["first"], c["notify"], c["steady"], c.get("one_cluster", 0.0))
        at_target = c["findings"] == ALERT_CYCLE_TARGET[0]
        rows.append(
            Row(
                "alerts",
                label,
                c["findings"],
                "slowest alert cycle s",
                slowest,
                "s",
                f"< {ALERT_CYCLE_TARGET[1]:g} s at 10k" if at_target else "",
                slowest < ALERT_CYCLE_TARGET[1] if at_target else None,
                when,
                load,
                f"first {c['first']:.2f}, notifying {c['notify']:.2f}, steady {c['steady']:.2f}"
                + (
                    f", after 1 of 4 clusters evaluated {c['one_cluster']:.2f},"
                    f" steady without the memory {c['steady_full']:.2f}"
                    if "one_cluster" in c
                    else ""
                ),
            )
        )
    sender = doc.get("sender")
    if sender:
        rows.append(
            Row(
                "alerts",
                f"{sender['notifications']:,} notifications",
                sender["notifications"],
                "sender notifications/s",
                sender["rate"],
                "1/s",
                f">= {SENDER_TARGET:g}/s",
                sender["rate"] >= SENDER_TARGET,
                when,
                load,
            )
        )
    latency = doc.get("latency")
    if latency:
        rows.append(
            Row(
                "alerts",
                "1 finding",
                1,
                "finding -> receiver ms (median)",
                latency["median_ms"],
                "ms",
                measured=when,
                load=load,
                note=f"max {latency['max_ms']:.0f} ms",
            )
        )
    return rows


def silences_rows(doc: dict[str, Any]) -> list[Row]:
    """Per size, the slower of the cycles that match every alert against the silences, and the
    silence step alone; then the costly silences' matching before and after."""
    machine = doc.get("machine", {})
    when, load = machine.get("date", ""), machine.get("loadavg_start")
    rows: list[Row] = []
    for c in doc.get("many", []):
        label = f"{c['silences']:,} silences, {c['alerts']:,} firing alerts"
        slowest = max(c["first"], c["steady"])
        at_target = (c["silences"], c["alerts"]) == SILENCES_TARGET[:2]
        b = c["baseline"]
        rows += [
            Row("silences", label, c["silences"], "alert cycle s (first, steady)", slowest, "s",
                f"<= {SILENCES_TARGET[2]:g} s at 1,000 x 10k" if at_target else "",
                slowest <= SILENCES_TARGET[2] if at_target else None, when, load,
                f"first {c['first']:.2f}, steady {c['steady']:.2f}, notifying {c['notify']:.2f}; without "
                f"silences {b['first']:.2f}, {b['steady']:.2f}, {b['notify']:.2f}"),
            Row("silences", label, c["silences"], "silence step s", c["matching"], "s", measured=when,
                load=load, note=f"{c['silenced']:,} of {c['firing']:,} firing alerts silenced"),
        ]  # fmt: skip
    k = doc.get("costly")
    if k:
        rows.append(
            Row("silences", f"{k['costly']} costly + {k['others']} silences, {k['alerts']:,} alerts",
                k["costly"], "silence matching s (now)", k["after"], "s", measured=when, load=load,
                note=f"before {k['before']:.2f} s (one silence after the other); one set per label without "
                f"the size limit {k['at_once_unbounded']:.2f} s; whole cycle {k['cycle_after']:.2f} s")
        )  # fmt: skip
    return rows


def web_rows(doc: dict[str, Any]) -> list[Row]:
    """Per size, at the highest concurrency, the slowest endpoint of each kind by p95."""
    rows: list[Row] = []
    for s in doc.get("sizes", []):
        results = s.get("results", [])
        if not results:
            continue
        top = max(r["concurrency"] for r in results)
        label = f"{s['topics']:,} topics, {top} clients"
        for kind in dict.fromkeys(r["kind"] for r in results):
            same = [r for r in results if r["kind"] == kind and r["concurrency"] == top]
            worst = max(same, key=lambda r: _nan_high(r["p95_ms"]))
            errors = sum(r["errors"] for r in results if r["kind"] == kind)
            note, shown = f"{worst['path']}, {worst['rps']:.1f} req/s", ""
            if worst["p95_ms"] != worst["p95_ms"]:  # every request took longer than the time limit
                limit = doc.get("max_seconds")
                shown = f"> {1000 * limit:,.0f}" if limit else "none in time"
                within = f"{limit:g} s" if limit else "the time limit"
                note = (f"{worst['path']}: no answer within {within}; one request alone took "
                        f"{worst.get('warmup_ms', float('nan')) / 1000:.1f} s")  # fmt: skip
            note += f"; {errors} errors" if errors else ""
            at_target = s["topics"] == WEB_TARGET[0] and kind in WEB_TARGET_KINDS
            rows.append(
                Row(
                    "web",
                    label,
                    s["topics"],
                    f"{kind}: slowest p95 ms",
                    _none(worst["p95_ms"]),
                    "ms",
                    target=f"<= {WEB_TARGET[1]:g} ms at 10k" if at_target else "",
                    met=_nan_high(worst["p95_ms"]) <= WEB_TARGET[1] if at_target else None,
                    measured=s.get("measured_at", ""),
                    load=s.get("loadavg_before"),
                    note=note,
                    shown=shown,
                )
            )
            if at_target:
                largest = max((r for r in results if r["kind"] == kind), key=lambda r: r.get("bytes", 0))
                rows.append(
                    Row(
                        "web",
                        label,
                        s["topics"],
                        f"{kind}: largest answer KB",
                        largest.get("bytes", 0) / 1024,
                        "KB",
                        target="<= 1,024 KB at 10k",
                        met=largest.get("bytes", 0) <= WEB_TARGET[2],
                        measured=s.get("measured_at", ""),
                        load=s.get("loadavg_before"),
                        note=largest["path"],
                    )
                )
    return rows


def metrics_rows(doc: dict[str, Any]) -> list[Row]:
    """/metrics per size and number of scrapers: p95 against one scrape's target (one scraper) or
    the concurrent scrapers' (more)."""
    rows: list[Row] = []
    for s in doc.get("sizes", []):
        for r in s.get("results", []):
            if r["kind"] != "metrics":
                continue
            alone = r["concurrency"] == 1
            limit = SCRAPE_TARGET[1] if alone else SCRAPE_TARGET[2]
            at_target = s["topics"] == SCRAPE_TARGET[0] and r["concurrency"] in (1, 4)
            rows.append(
                Row(
                    "metrics",
                    f"{s['topics']:,} topics, {r['concurrency']} scraper{'' if alone else 's'}",
                    s["topics"],
                    "scrape p95 ms",
                    _none(r["p95_ms"]),
                    "ms",
                    target=f"<= {limit:,.0f} ms at 10k" if at_target else "",
                    met=_nan_high(r["p95_ms"]) <= limit if at_target else None,
                    measured=s.get("measured_at", ""),
                    load=s.get("loadavg_before"),
                    note=f"p50 {r['p50_ms']:.1f} ms, {r.get('bytes', 0) / 1_048_576:.1f} MB",
                )
            )
    return rows


def push_rows(doc: dict[str, Any]) -> list[Row]:
    """The slowest push cycle of the run, against the one cycle (15 s) it must fit in."""
    cycles = doc.get("cycles", [])
    series = int(doc.get("series", 0))
    label = f"{series:,} series"
    when, load = doc.get("measured_at", ""), doc.get("loadavg_before")
    if not cycles:
        return [Row("push", label, series, "remote write cycle s (slowest)", None, "s", measured=when,
                    load=load, note="failed: no cycle")]  # fmt: skip
    worst = max(c["seconds"] for c in cycles)
    at_target = series == PUSH_TARGET[0]
    stored = min(c.get("stored_series", 0) for c in cycles)
    return [
        Row(
            "push",
            label,
            series,
            "remote write cycle s (slowest)",
            worst,
            "s",
            f"<= {PUSH_TARGET[1]:g} s at 100k" if at_target else "",
            worst <= PUSH_TARGET[1] if at_target else None,
            when,
            load,
            f"{len(cycles)} cycles; {stored:,} series read back from Prometheus",
        )
    ]


def detect_rows(doc: dict[str, Any]) -> list[Row]:
    """Per rule, fault -> notice accepted beyond the rule's `for:`; then the daemon at idle."""
    when = str(doc.get("date", ""))
    loads = doc.get("load_average") or []
    load = float(loads[0]) if loads else None
    rows: list[Row] = []
    for r in doc.get("rules", []):
        notice = r.get("to_notice")
        beyond = None if notice is None else notice - r["for_seconds"]
        rows.append(
            Row(
                "detect",
                f"{r['rule']} (for: {r['for_seconds']} s)",
                r["for_seconds"],
                "fault -> notice accepted, s beyond for:",
                beyond,
                "s",
                f"<= {DETECT_BEYOND_FOR:g} s",
                None if beyond is None else beyond <= DETECT_BEYOND_FOR,
                when,
                load,
                "" if notice is None else f"fault -> firing {r['to_firing']:.1f} s, -> notice {notice:.1f} s",
                shown="" if notice is not None else "not seen",
            )
        )
    settle = f" after {doc['settle_seconds']} s" if doc.get("settle_seconds") else ""
    idle = f"idle {doc.get('idle_seconds', 0)} s{settle}, small cluster"
    cpu = doc.get("idle_cpu_seconds_per_minute")
    if cpu is not None:
        rows.append(Row("detect", idle, 0, "daemon CPU-s per minute", cpu, "s/min",
                        f"<= {DETECT_IDLE_CPU:g}", cpu <= DETECT_IDLE_CPU, when, load))  # fmt: skip
    median, p95 = doc.get("evaluation_median_seconds"), doc.get("evaluation_p95_seconds")
    if median is not None and p95 is not None:
        rows.append(
            Row(
                "detect",
                idle,
                0,
                "evaluation s (median)",
                median,
                "s",
                f"<= {DETECT_EVALUATION[0]:g} s (p95 <= {DETECT_EVALUATION[1]:g} s)",
                median <= DETECT_EVALUATION[0] and p95 <= DETECT_EVALUATION[1],
                when,
                load,
                f"p95 {p95:.1f} s over {doc.get('evaluations', 0)} evaluations",
            )
        )
    return rows


def _nan_high(value: float) -> float:
    """A NaN p95 (nothing answered in time) is the slowest of all."""
    return float("inf") if value != value else value


def _none(value: float) -> float | None:
    return None if value != value else value


def nearest_rank(values: list[float], fraction: float) -> float | None:
    """The value at `fraction` of the sorted values (the nearest rank); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def fresh_visible_rows(doc: dict[str, Any]) -> list[Row]:
    """Commit-to-visible through each answer: the median (against the target) and the p95."""
    size = int(doc.get("group_partitions", 0))
    label = f"{size:,} group-partitions"
    when, load = doc.get("measured_at", ""), (doc.get("loadavg_before") or [None])[0]
    at_target = size == FRESH_VISIBLE_TARGET[0]
    limit = FRESH_VISIBLE_TARGET[1]
    rows: list[Row] = []
    for answer in ("api", "burrow"):
        values = sorted(doc.get("seconds", {}).get(answer, []))
        unseen = doc.get("unseen", {}).get(answer, 0)
        note = f"{len(values)} commits" + (f", {unseen} not seen within 30 s" if unseen else "")
        cost = f"{answer}: commit to visible s"
        if not values:
            note = "failed: no commit seen"
            rows.append(Row("fresh-visible", label, size, f"{cost} (median)", None, "s", note=note))
            continue
        middle = _median(values)
        p95 = nearest_rank(values, 0.95)
        target = f"<= {limit:g} s at 100k" if at_target else ""
        met = middle <= limit if at_target else None
        rows += [
            Row("fresh-visible", label, size, f"{cost} (median)", middle, "s", target, met, when, load, note),
            Row("fresh-visible", label, size, f"{cost} (p95)", p95, "s", measured=when, load=load, note=note),
        ]
    return rows


STORAGE_TARGETS = (5.0, 0.5)
"""bench/storage.py's (issue 31): a day of rollups costs <= 5 % of a day of raw evaluations; a
90-day history read of one group at 100,000 group-partitions answers in <= 0.5 s."""


def storage_rows(doc: dict[str, Any]) -> list[Row]:
    """A day of rollups against a day of raw evaluations per size, and the 90-day read."""
    when, load = doc.get("measured_at", ""), (doc.get("loadavg_before") or [None])[0]
    rows: list[Row] = []
    for size in doc.get("sizes", []):
        count = int(size["group_partitions"])
        share = 100 * (size["15m"] + size["1h"]) / size["raw"]
        note = f"raw {size['raw'] / 1e9:,.1f} GB/day, rollups {(size['15m'] + size['1h']) / 1e6:,.0f} MB/day"
        rows.append(
            Row("storage", f"{count:,} group-partitions", count, "a day of rollups, % of a day of raw",
                share, "%", f"<= {STORAGE_TARGETS[0]:g} %", share <= STORAGE_TARGETS[0], when, load, note)
        )  # fmt: skip
    read = doc.get("read")
    if read:
        median = float(read["median_s"])
        rows.append(
            Row("storage", "100,000 group-partitions", 100_000, "90-day history read of one group s (median)",
                median, "s", f"<= {STORAGE_TARGETS[1]:g} s", median <= STORAGE_TARGETS[1], when, load,
                f"slowest {read['slowest_s']:.2f} s of {read['repeats']}, {read['points']} points")
        )  # fmt: skip
    return rows


def history_brackets_rows(doc: dict[str, Any]) -> list[Row]:
    """The end-offset history read after each number of days of samples; after the first, it must
    stay within twice the read after the fewest days (it must not grow with the days kept)."""
    when, load = doc.get("measured_at", ""), doc.get("loadavg_before")
    runs = doc.get("runs") or []
    rows: list[Row] = []
    for run in runs:
        value = float(run["median_seconds"])
        first = runs[0]
        later = run is not first
        rows.append(
            Row("history-brackets", f"{doc.get('partitions')} partitions, {run['days']} day(s) of samples",
                float(run["days"]), "end-offset history read s (median)", value, "s",
                f"<= 2 x the {first['days']}-day read" if later else "",
                value <= 2 * float(first["median_seconds"]) if later else None, when, load,
                f"{run['targets']} targets, {run['samples']:,} samples, slowest {run['max_seconds']} s")
        )  # fmt: skip
    return rows


FOOTPRINT_TARGETS: dict[int, tuple[float | None, float, float, float | None]] = {
    10_000: (5.0, 6.0, 1200.0, None),
    100_000: (None, 12.0, 1500.0, 1.0),
}
"""bench/footprint.py's (issue 31), by group-partitions: the whole daemon's complete lag through
the API after its start (s), steady CPU-s per minute with PostgreSQL's, resident MB with the Spark
driver, and the age of the lag served (median s). At 10,000: <= 5 s, 6 CPU-s, 1.2 GB; at 100,000:
<= 12 CPU-s, 1.5 GB, lag <= 1 s old."""

FOOTPRINT_POSTGRES_LIMIT = {100_000: 4.0}
"""Of the steady CPU-s per minute, PostgreSQL's at most (by group-partitions)."""


FOOTPRINT_FULL_STEADY = 60
"""The shortest steady window of a run the table takes its figures from."""


def footprint_rows(doc: dict[str, Any]) -> list[Row]:
    """Of each fleet size measured, the newest full run's time to a complete answer, steady CPU,
    resident memory and the age of the lag it served. A run for the start's figures only (a
    steady window under FOOTPRINT_FULL_STEADY seconds, `--steady 10`) measured no steady state;
    a run of code no commit holds (`code_commit`'s UNCOMMITTED: a trial, kept in the report with
    its note) does not measure the project."""
    newest: dict[int, dict[str, Any]] = {}
    for run in doc.get("runs") or []:
        full = run.get("steady_seconds", FOOTPRINT_FULL_STEADY) >= FOOTPRINT_FULL_STEADY
        if full and not str(run.get("commit", "")).endswith(UNCOMMITTED):
            newest[int(run["group_partitions"])] = run
    rows: list[Row] = []
    for size, run in sorted(newest.items()):
        rows += _footprint_run_rows(run, FOOTPRINT_TARGETS.get(size, (None, None, None, None)))
    return rows


def _met(value: float, limit: float | None) -> bool | None:
    return None if limit is None else value <= limit


def _footprint_run_rows(run: dict[str, Any], limits: tuple[float | None, ...]) -> list[Row]:
    when, load = run.get("measured_at", ""), (run.get("loadavg_before") or [None])[0]
    label = f"{int(run['group_partitions']):,} group-partitions"
    size = float(run["group_partitions"])
    api, cpu = run["complete"]["api"]["seconds"], run["steady"]["cpu_per_minute"]
    rss = run["steady"]["memory_mb"]["rss_max"]
    age = (run["steady"].get("lag_age_seconds") or {}).get("median")
    api_limit, cpu_limit, rss_limit, age_limit = limits
    pg_limit = FOOTPRINT_POSTGRES_LIMIT.get(int(run["group_partitions"]))
    cpu_target = "" if cpu_limit is None else f"<= {cpu_limit:g}"
    cpu_met = _met(cpu["total"], cpu_limit)
    if pg_limit is not None:
        cpu_target += f" (PostgreSQL <= {pg_limit:g})"
        cpu_met = cpu_met and cpu["postgres"] <= pg_limit
    rows = [
        Row("footprint", label, size, "start -> complete lag through the API s", api, "s",
            "" if api_limit is None else f"<= {api_limit:g} s", _met(api, api_limit), when, load,
            f"/metrics {run['complete']['metrics']['seconds']} s; run `{run['label']}`"),
        Row("footprint", label, size, "steady CPU-s per minute, daemon and PostgreSQL", cpu["total"], "CPU-s",
            cpu_target, cpu_met, when, load,
            f"Python {cpu['python']}, JVM {cpu['jvm']}, PostgreSQL {cpu['postgres']}"),
        Row("footprint", label, size, "resident MB, daemon and Spark JVM (RSS)", rss, "MB",
            "" if rss_limit is None else f"<= {rss_limit:,.0f} MB", _met(rss, rss_limit), when, load,
            f"PSS {run['steady']['memory_mb']['pss_max']} MB"),
    ]  # fmt: skip
    if age is not None and age_limit is not None:
        rows.append(
            Row("footprint", label, size, "age of the lag served through the API s (median)", age, "s",
                f"<= {age_limit:g} s", _met(age, age_limit), when, load,
                f"max {run['steady']['lag_age_seconds'].get('max')} s")
        )  # fmt: skip
    return rows


READERS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "collector": collector_rows,
    "ingest": ingest_rows,
    "evaluate": evaluate_rows,
    "evaluate-still": evaluate_still_rows,
    "alerts": alerts_rows,
    "silences": silences_rows,
    "web": web_rows,
    "metrics": metrics_rows,
    "push": push_rows,
    "fresh-visible": fresh_visible_rows,
    "detect": detect_rows,
    "storage": storage_rows,
    "footprint": footprint_rows,
    "history-brackets": history_brackets_rows,
}


def load(results: Path, published: Path | None = None) -> dict[str, dict[str, Any]]:
    """Every benchmark's JSON document found in `results`, by benchmark name; one that is not
    there is read from the `published` directory (docs/bench/) when it has it, as published."""
    documents = {}
    for name in READERS:
        for directory in (results, published):
            path = directory / f"{name}.json" if directory is not None else None
            if path is not None and path.is_file():
                documents[name] = json.loads(path.read_text())
                break
    return documents


def rows(documents: dict[str, dict[str, Any]], published: Path | None = None) -> list[Row]:
    """The rows of every benchmark in `documents`; a benchmark without a document keeps its rows
    from the `published` summary.json (when given), with the date they were measured."""
    kept: dict[str, list[Row]] = {}
    if published is not None and published.is_file():
        for row in json.loads(published.read_text()).get("rows", []):
            if row.get("benchmark") in READERS and row["benchmark"] not in documents:
                kept.setdefault(row["benchmark"], []).append(Row(**row))
    table: list[Row] = []
    for name, reader in READERS.items():
        table.extend(reader(documents[name]) if name in documents else kept.get(name, []))
    return table


def _value(row: Row) -> str:
    if row.value is None:
        return row.shown or "failed"
    if row.value >= 1000:
        return f"{row.value:,.0f}"
    return f"{row.value:.3g}" if row.value < 10 else f"{row.value:.1f}"


def markdown(table: list[Row], machine: dict[str, Any], status: dict[str, str]) -> str:
    met = {True: "yes", False: "**no**", None: ""}
    lines = [
        "| benchmark | input | cost | value | target | met | measured (load) | note |",
        "|---|---|---|---:|---|---|---|---|",
    ]
    for r in table:
        load = f" ({r.load:.1f})" if r.load is not None else ""
        lines.append(
            f"| {r.benchmark} | {r.input} | {r.cost} | {_value(r)} | {r.target} | {met[r.met]} "
            f"| {r.measured}{load} | {r.note} |"
        )
    head = [
        "## Benchmark results",
        "",
        f"Summarised {machine['date']} on {machine_text(machine)}. Each row gives when it was measured "
        "and the 1-minute load average then; each script's own report (`<benchmark>.md` beside this "
        "table) has every figure.",
        "",
    ]
    if status:
        head += ["This run: " + ", ".join(f"{name} {state}" for name, state in status.items()) + ".", ""]
    return "\n".join(head + lines) + "\n"


def machine_text(machine: dict[str, Any]) -> str:
    return (
        f"{machine['cpus']} CPU, {machine['memory']} RAM, {machine['system']}, Python {machine['python']}, "
        f"PostgreSQL {machine.get('postgresql', 'unknown')}"
    )


def document(table: list[Row], machine: dict[str, Any], status: dict[str, str]) -> dict[str, Any]:
    return {"machine": machine, "status": status, "rows": [asdict(r) for r in table]}

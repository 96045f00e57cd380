"""The offsets collector benchmark's report (bench/collector.py): the machine, the verdicts on
issue 19's targets and the commit stream's, the Markdown tables, and the results files."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from importlib.metadata import version as package_version
from pathlib import Path
from statistics import median
from typing import Any

from confluent_kafka import libversion as librdkafka_version

from monitor.core.settings import DevKafkaConfig

TARGET_CYCLE_SECONDS = 10.0
TARGET_EXACT = 0.95
TARGET_RSS_MB = 500.0
TARGET_SIZE = 10_000
RESULTS = Path(__file__).resolve().parent / "results"

# Where a cycle's time goes: (key, label). Keys marked nested are inside another step, or run
# beside other steps, and are not added to the total.
STEPS: list[tuple[str, str]] = [
    ("list_group_ids", "1. list groups (ListGroups, every broker)"),
    ("describe_groups", "1. describe groups (DescribeGroups, beside steps 2 and 3)"),
    ("committed_offsets", "2. committed offsets (one OffsetFetch per group)"),
    ("list_offsets", "3. list offsets (earliest/latest/max-timestamp)"),
    ("targets", "4. timestamp targets (lag.*_targets)"),
    ("cache_memory", "4. timestamp cache in memory"),
    ("cache_db", "4. timestamp cache in PostgreSQL (cached_timestamps)"),
    ("reader", "4. timestamp reader (Kafka consumer, within the budget)"),
    ("history", "5. end-offset history (end_offset_brackets)"),
    ("samples", "6. lag samples and commit observations (lag.*)"),
    ("previous", "6. previous commits (latest_committed)"),
    ("db_batch", "6. write the batch (submit: transaction + commit)"),
    ("db_batch_sql", "   of which write_offsets_batch"),
    ("db_run", "run row (start insert, finish update)"),
    ("db_history", "cold cycle's history rows (own thread, after its run, beside the next cycle)"),
]
NESTED = {"db_batch_sql", "describe_groups", "db_history"}


def _memory_total() -> str:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    return "unknown"


def machine(pg_version: str, kafka_version: str | None = None) -> dict[str, Any]:
    return {
        "cpus": len(os.sched_getaffinity(0)),
        "memory": _memory_total(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "kafka": kafka_version or DevKafkaConfig().version,
        "postgresql": pg_version,
        "python": platform.python_version(),
        "confluent_kafka": package_version("confluent-kafka"),
        "librdkafka": librdkafka_version()[0],
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_start": os.getloadavg()[0],
    }


def exact_share(counts: dict[str, int]) -> float | None:
    lagging = counts.get("lagging_group_partitions", 0)
    return counts.get("exact", 0) / lagging if lagging else None


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}"


def verdicts(sizes: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """(target, met, detail) for each target; met is None when the size was not run."""
    at = next((s for s in sizes if s["partitions"] == TARGET_SIZE and "cycles" in s), None)
    found: list[tuple[str, bool | None, str]] = []
    if at is None:
        found.append((f"cycle < {TARGET_CYCLE_SECONDS:g} s at 10k partitions", None, "10k not run"))
        found.append((f"exact >= {TARGET_EXACT:.0%} of lagging at 10k", None, "10k not run"))
    else:
        runs = at.get("runs", [])
        times = [c["seconds"] for c in at["cycles"]]
        if len(runs) > 1:
            times = [median(r["seconds"][i] for r in runs) for i in range(len(runs[0]["seconds"]))]
        found.append(
            (
                f"cycle < {TARGET_CYCLE_SECONDS:g} s at 10k partitions, {at['groups']} groups",
                all(t < TARGET_CYCLE_SECONDS for t in times),
                "cycles " + ", ".join(f"{t:.2f} s" for t in times),
            )
        )
        # A cycle still filling after a start leaves append times for the next on purpose.
        filling = [c for c in at["cycles"] if (c["run"]["counts"] or {}).get("filling")]
        exact = [exact_share(c["run"]["counts"]) for c in at["cycles"] if c not in filling]
        found.append(
            (
                f"exact timestamps for >= {TARGET_EXACT:.0%} of lagging group-partitions at 10k",
                all(e is not None and e >= TARGET_EXACT for e in exact),
                "cycles "
                + ", ".join(f"{_pct(e)} %" for e in exact)
                + (f"; {len(filling)} cycle(s) still filling after the start left out" if filling else ""),
            )
        )
    found += stream_verdicts(sizes)
    measured = [s for s in sizes if "memory" in s]
    if measured:
        peaks = [(s["partitions"], s["memory"]["peak_mb"]) for s in measured]
        found.append(
            (
                f"collector RSS < {TARGET_RSS_MB:g} MB",
                all(p < TARGET_RSS_MB for _, p in peaks),
                "peak " + ", ".join(f"{p:.0f} MB at {n:,}" for n, p in peaks),
            )
        )
    return found


# Issue 19's targets, at 100k group-partitions (2 cores, quiet machine).
TARGET_GROUP_PARTITIONS = 100_000
TARGET_FIRST_ANSWER_SECONDS = 2.5
TARGET_VISIBLE_MEDIAN_SECONDS = 1.0
TARGET_VISIBLE_P95_SECONDS = 2.0
TARGET_CPU_PER_MINUTE = 3.0
TARGET_WARM_CYCLE_SECONDS = 2.0
TARGET_PEAK_RSS_MB = 300.0


def _warm_cycles(size: dict[str, Any]) -> list[float]:
    """The cycle times of the steady state, else of the cycles after the cold one and its fill."""
    steady = size.get("steady") or {}
    if steady.get("cycles"):
        return list(steady["cycles"])
    cycles = size.get("cycles", [])
    return [c["seconds"] for c in cycles[1:] if not c.get("asked")]


def stream_verdicts(sizes: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """Issue 19's targets at the size with 100k group-partitions (None: not run)."""
    at = next(
        (
            s
            for s in sizes
            if s.get("group_partitions_committed") == TARGET_GROUP_PARTITIONS and "cycles" in s
        ),
        None,
    )
    names = [
        f"first complete answer <= {TARGET_FIRST_ANSWER_SECONDS:g} s after start at 100k group-partitions",
        f"a commit visible <= {TARGET_VISIBLE_MEDIAN_SECONDS:g} s median, "
        f"<= {TARGET_VISIBLE_P95_SECONDS:g} s p95",
        f"steady CPU <= {TARGET_CPU_PER_MINUTE:g} CPU-seconds per minute",
        f"offsets cycle <= {TARGET_WARM_CYCLE_SECONDS:g} s (warm)",
        f"peak RSS <= {TARGET_PEAK_RSS_MB:g} MB at 100k group-partitions",
    ]
    if at is None:
        return [(name, None, "100k group-partitions not run") for name in names]
    cold = at.get("cold") or {}
    steady = at.get("steady") or {}
    visible = steady.get("commit_visible") or {}
    first = cold.get("first_complete_seconds")
    warm = _warm_cycles(at)
    found: list[tuple[str, bool | None, str]] = [
        (names[0], None if first is None else first <= TARGET_FIRST_ANSWER_SECONDS, _secs(first)),
    ]
    middle, p95 = visible.get("median_seconds"), visible.get("p95_seconds")
    found.append(
        (
            names[1],
            None
            if middle is None or p95 is None
            else middle <= TARGET_VISIBLE_MEDIAN_SECONDS
            and p95 <= TARGET_VISIBLE_P95_SECONDS
            and not visible.get("unseen"),
            f"median {_secs(middle)}, p95 {_secs(p95)}, {visible.get('unseen', 0)} of "
            f"{visible.get('probes', 0)} not seen",
        )
    )
    cpu = steady.get("cpu_per_minute")
    found.append(
        (names[2], None if cpu is None else cpu <= TARGET_CPU_PER_MINUTE, f"{cpu:.2f}" if cpu else "-")
    )
    found.append(
        (
            names[3],
            all(t <= TARGET_WARM_CYCLE_SECONDS for t in warm) if warm else None,
            ", ".join(f"{t:.2f} s" for t in warm) or "-",
        )
    )
    peak = at["memory"]["peak_mb"]
    found.append((names[4], peak <= TARGET_PEAK_RSS_MB, f"{peak:.0f} MB"))
    return found


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} s"


def stream_table(sizes: list[dict[str, Any]]) -> list[str]:
    """Start to the first complete answer, commit to visible, steady CPU and cycles, per size."""
    measured = [s for s in sizes if "cycles" in s and ("cold" in s or "steady" in s)]
    if not measured:
        return []
    lines = [
        "",
        "### Cold start, commit latency and steady cost",
        "",
        "| partitions | group-partitions | first complete answer s | append times filled s | commit visible "
        "median s | p95 s | probes (unseen) | steady CPU s / min | steady cycles s | peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---|---:|---|---:|",
    ]
    for s in measured:
        cold, steady = s.get("cold") or {}, s.get("steady") or {}
        visible = steady.get("commit_visible") or {}
        cpu = steady.get("cpu_per_minute")
        lines.append(
            f"| {s['partitions']:,} | {s['group_partitions_committed']:,} "
            f"| {_secs(cold.get('first_complete_seconds'))} | {_secs(cold.get('filled_seconds'))} "
            f"| {_secs(visible.get('median_seconds'))} | {_secs(visible.get('p95_seconds'))} "
            f"| {visible.get('probes', 0)} ({visible.get('unseen', 0)}) "
            f"| {'-' if cpu is None else f'{cpu:.2f}'} "
            f"| {', '.join(f'{t:.2f}' for t in steady.get('cycles', [])) or '-'} "
            f"| {s['memory']['peak_mb']:.0f} |"
        )
    lines += [
        "",
        "First complete answer: from the measuring process's start (clients built, the commit stream "
        "started, the metadata job) until the store holds a lag sampled since then for every committed "
        "group-partition; the daemon starts the offsets job's first run at once, beside the metadata "
        "job's. Append times filled: "
        "until a run's `filling` count is 0 (the cycles the job asks for at once). Commit visible: from "
        "a commit request (one a second, by a consumer of the group) to its commit observation found "
        "in the store (polled every 10 ms). Steady CPU: user + system seconds of the measuring process "
        "(every thread) over whole offsets intervals with the commit stream on, per minute.",
    ]
    return lines


def report(info: dict[str, Any], collect: dict[str, Any], sizes: list[dict[str, Any]]) -> str:
    if sizes and "collect" in sizes[0]:  # the settings of the first size; the others say so if they differ
        collect = {k: v for k, v in sizes[0]["collect"].items() if k in collect}
    lines = [
        "## Offsets collector: cycle time, exact timestamps, memory",
        "",
        f"Machine: {info['cpus']} CPU (nproc), {info['memory']} RAM, {info['system']}; "
        f"Kafka {info['kafka']} (local, RF 1); PostgreSQL {info['postgresql']}; "
        f"Python {info['python']}; confluent-kafka {info['confluent_kafka']} "
        f"(librdkafka {info['librdkafka']}); {info['date']}; load average (1 min) at start "
        f"{info['loadavg_start']:.2f} (a decaying average: it still counts what ran in the minutes "
        "before, an earlier benchmark's setup too).",
        "",
        "Collect settings: " + ", ".join(f"{k} = {v}" for k, v in collect.items()) + ".",
        "",
        "Measured: "
        + "; ".join(
            f"{s['partitions']:,} partitions at {s.get('measured_at', info['date'])}"
            + (
                f" (request timeout {s['collect']['request_timeout_seconds']:g} s)"
                if s.get("collect", collect).get("request_timeout_seconds")
                != collect["request_timeout_seconds"]
                else ""
            )
            for s in sizes
        )
        + ".",
        "",
        "| partitions | Kafka nodes | groups | group-partitions | lagging | cycle 1 s (cold) | cycle 2 s "
        "| cycle 3 s | exact % (1 / 2 / 3) | peak RSS MB | RSS MB | load avg |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for s in sizes:
        if "cycles" not in s:
            lines.append(
                f"| {s['partitions']:,} | {s.get('kafka_nodes', '')} | failed: {s.get('error', '')} |"
            )
            continue
        ran = [c["run"]["counts"] for c in s["cycles"] if c["run"]["status"] != "failed"]
        first = ran[0] if ran else {}
        secs = [
            f"{c['seconds']:.2f}" + (" failed" if c["run"]["status"] == "failed" else "") for c in s["cycles"]
        ] + ["-"] * (3 - len(s["cycles"]))
        runs = s.get("runs", [])
        if len(runs) > 1:  # the median of each cycle over the runs, then each run's figure
            secs = [
                f"{median(r['seconds'][i] for r in runs):.2f} ("
                + ", ".join(f"{r['seconds'][i]:.2f}" for r in runs)
                + ")"
                for i in range(len(runs[0]["seconds"]))
            ] + ["-"] * (3 - len(runs[0]["seconds"]))
        exact = " / ".join(_pct(exact_share(c["run"]["counts"])) for c in s["cycles"])
        load = max([s["loadavg_before"]] + [c["loadavg"] for c in s["cycles"]])
        load = max([load] + [a for r in runs for a in r["loadavg"]])
        lines.append(
            f"| {s['partitions']:,} | {s['kafka_nodes']} | {first.get('groups', 0)} "
            f"| {first.get('group_partitions', 0):,} | {first.get('lagging_group_partitions', 0):,} "
            f"| {' | '.join(secs[:3])} | {exact} | {s['memory']['peak_mb']:.0f} "
            f"| {s['memory']['rss_mb']:.0f} | {load:.1f} |"
        )
    for s in sizes:
        if s.get("why_not_single_node"):
            lines += [
                "",
                f"{s['partitions']:,} partitions ran on {s['kafka_nodes']} brokers, not one: "
                f"{s['why_not_single_node']}.",
            ]
    lines += [
        "",
        "Cycle times with figures in brackets: the median over that many cold-started runs "
        "(--repeat), then each run's; the other columns and the tables below are of the run with the "
        "median cold cycle. "
        "Exact % = counts.exact / counts.lagging_group_partitions of the cycle's collection_runs row. "
        "RSS is the measuring process (the collector alone: Python, its clients, caches and batch); "
        "Kafka and PostgreSQL run in their own processes and are not counted. Load avg is the highest "
        "1-minute load average seen during the size (2 CPUs).",
        "",
        "### Per cycle",
        "",
        "| partitions | cycle | s | status | groups | group-partitions | lagging | exact % | timestamps "
        "needed | read | unread | interpolated | rows |",
        "|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        for c in s.get("cycles", []):
            n = c["run"]["counts"]
            lines.append(
                f"| {s['partitions']:,} | {c['cycle']} | {c['seconds']:.2f} | {c['run']['status']} "
                f"| {n.get('groups', 0)} | {n.get('group_partitions', 0):,} "
                f"| {n.get('lagging_group_partitions', 0):,} | {_pct(exact_share(n))} "
                f"| {n.get('timestamps_needed', 0):,} | {n.get('timestamps_read', 0):,} "
                f"| {n.get('timestamps_unread', 0):,} | {n.get('interpolated', 0):,} | {n.get('rows', 0):,} |"
            )
    lines += stream_table(sizes)
    problems = [
        f"- {s['partitions']:,} partitions, cycle {c['cycle']} ({c['run']['status']}): {c['run']['error']}"
        for s in sizes
        for c in s.get("cycles", [])
        if c["run"].get("error")
    ]
    if problems:
        lines += ["", *problems]
    lines += ["", "### Where a cycle's time goes (seconds)", ""]
    measured = [s for s in sizes if "cycles" in s]
    if measured:
        header = ["step"]
        for s in measured:
            header += [f"{s['partitions'] // 1000}k c{c['cycle']}" for c in s["cycles"]]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|---" + "|---:" * (len(header) - 1) + "|")
        sql = sorted({k for s in measured for c in s["cycles"] for k in c["steps"] if k.startswith("sql ")})
        rows = [*STEPS, *((k, f"   - {k}") for k in sql)]
        rows += [("other", "other (filtering, building the batch, counts)"), ("", "")]
        for key, label in rows:
            if not key:
                label = "**cycle wall time**"
            cells = [label]
            for s in measured:
                for c in s["cycles"]:
                    steps = c["steps"]
                    if key == "other":
                        value = c["seconds"] - sum(
                            v["seconds"]
                            for k, v in steps.items()
                            if k not in NESTED and not k.startswith("sql ")
                        )
                    elif not key:
                        value = c["seconds"]
                    else:
                        value = steps.get(key, {}).get("seconds", 0.0)
                    cells.append(f"{value:.3f}")
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", "Metadata job (once per size, before cycle 1): "]
        lines[-1] += (
            ", ".join(f"{s['partitions']:,}: {s['metadata']['seconds']:.2f} s" for s in measured) + "."
        )
    if len(measured) > 1:
        base = measured[0]
        growth = []
        for s in measured:
            ratio = s["cycles"][0]["seconds"] / base["cycles"][0]["seconds"]
            warm = s["cycles"][-1]["seconds"] / base["cycles"][-1]["seconds"]
            growth.append(
                f"{s['partitions']:,} partitions: x{ratio:.1f} cold, x{warm:.1f} warm "
                f"(for x{s['partitions'] / base['partitions']:.0f} partitions)"
            )
        lines += ["", "Growth against the smallest size: " + "; ".join(growth) + "."]
    lines += ["", "### Setup (not part of the measurement)", ""]
    lines.append(
        "| partitions | records | groups committed | group-partitions | Kafka up s | topics s "
        "| produce s | commits s | check: exact ok | check: partitions ok |"
    )
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for s in measured:
        st, v = s["setup"], s["verification"]
        lines.append(
            f"| {s['partitions']:,} | {s['records']:,} | {s['groups']} | {s['group_partitions_committed']:,} "
            f"| {st['kafka_up']:.1f} | {st['topics']:.1f} | {st['produce']:.1f} | {st['commits']:.1f} "
            f"| {v['exact_checked'] - v['exact_wrong']:,}/{v['exact_checked']:,} "
            f"| {v['partitions_checked'] - v['partitions_wrong']:,}/{v['partitions_checked']:,} |"
        )
    lines += ["", "### Targets", ""]
    for target, met, detail in verdicts(sizes):
        mark = "not measured" if met is None else ("met" if met else "NOT met")
        lines.append(f"- {target}: **{mark}** ({detail})")
    return "\n".join(lines) + "\n"


def results_stem(kafka_version: str | None) -> str:
    """The results files' name: `collector` at the default Kafka version, `collector-kafka-X` at
    another (the version comparison keeps both)."""
    return "collector" if kafka_version is None else f"collector-kafka-{kafka_version}"


def save(
    info: dict[str, Any], collect: dict[str, Any], sizes: list[dict[str, Any]], stem: str = "collector"
) -> str:
    """Write the report of `sizes` to bench/results/<stem>.{md,json}; return the Markdown."""
    text_report = report(info, {k: v for k, v in collect.items() if k != "buffer_max_rows"}, sizes)
    targets = [{"target": t, "met": m, "detail": d} for t, m, d in verdicts(sizes)]
    document = {"machine": info, "collect": collect, "sizes": sizes, "targets": targets}
    (RESULTS / f"{stem}.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    (RESULTS / f"{stem}.md").write_text(text_report)
    return text_report

"""Remote write at fleet scale: one push cycle of `--series` group-partition lag series (default
100,000: 1,000 groups x 10 topics x 10 partitions) to a real Prometheus, against the 15 s cycle it
must fit in.

    .venv/bin/python bench/push.py
    .venv/bin/python bench/push.py --series 200000 --cycles 5

Debian's `prometheus` is started with the remote-write receiver on (`monitor.devtools.servers.
PrometheusServer`, data under var/bench/prometheus-push or $KAFKA_HEALTH_VAR/bench/...) on a free
port and stopped at the end. The series are state families as the `/metrics` snapshot keeps them
for the push targets (`kafka_consumer_group_lag_in_offsets`, kafka-lag-go's labels), and each
cycle is what the push job does (`push.stage.push_once`): select the target's series, encode the
WriteRequest (protobuf + snappy) and POST it. Reported per cycle: seconds, and the series
Prometheus holds afterwards (queried back through its HTTP API).

Output: Markdown on stdout, progress on stderr, and bench/results/push.md and push.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily

from monitor.core.settings import RemoteWriteTarget
from monitor.devtools.paths import var_dir
from monitor.devtools.servers import PrometheusServer
from monitor.expose.metrics.catalogue import BY_NAME
from monitor.expose.metrics.push.remote_write import RemoteWriter
from monitor.expose.metrics.push.stage import push_once

RESULTS = Path(__file__).resolve().parent / "results"
METRIC = "kafka_consumer_group_lag_in_offsets"
CLUSTER = "bench"
CYCLE_SECONDS = 15.0
PROMETHEUS_PORTS = range(29090, 29190)


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def families(series: int) -> list[GaugeMetricFamily]:
    """`series` group-partition lags: groups of 10 topics of 10 partitions."""
    spec = BY_NAME[METRIC]
    family = GaugeMetricFamily(METRIC, spec.meaning, labels=spec.labels)
    for n in range(series):
        group, topic, partition = n // 100, n // 10, n % 10
        labels = [CLUSTER, CLUSTER, f"group-{group:05d}", f"topic-{topic:06d}", str(partition)]
        family.add_metric(labels, n % 977)
    return [family]


def _free_port() -> int:
    for port in PROMETHEUS_PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PROMETHEUS_PORTS.start}-{PROMETHEUS_PORTS.stop - 1}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    state = families(args.series)
    server = PrometheusServer(var_dir() / "bench" / "prometheus-push", _free_port())
    cycles: list[dict[str, Any]] = []
    loadavg_before = os.getloadavg()[0]
    with server:
        target = RemoteWriteTarget(name="bench", url=server.remote_write_url, metrics=[METRIC],
                                   timeout_seconds=CYCLE_SECONDS)  # fmt: skip
        writer = RemoteWriter(target)
        try:
            for cycle in range(args.cycles):
                started = time.perf_counter()
                sent = push_once(writer, state, datetime.now(UTC))
                seconds = time.perf_counter() - started
                (stored,) = server.query(f"count({METRIC})") or [{"value": [0, "0"]}]
                cycles.append({"cycle": cycle + 1, "sent": sent, "seconds": seconds,
                               "stored_series": int(float(stored["value"][1]))})  # fmt: skip
                _log(f"cycle {cycle + 1}: {sent:,} samples in {seconds:.2f} s")
                time.sleep(max(0.0, 1.0 - seconds))  # a later timestamp for the next cycle
        finally:
            writer.close()
    return {
        "series": args.series,
        "measured_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg_before": loadavg_before,
        "loadavg_after": os.getloadavg()[0],
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "cycles": cycles,
    }


def report(result: dict[str, Any]) -> str:
    worst = max(c["seconds"] for c in result["cycles"])
    lines = [
        "## Remote write: one push cycle to a real Prometheus",
        "",
        f"{result['series']:,} series of `{METRIC}` per cycle, measured {result['measured_at']}, "
        f"{result['machine']['cpus']} CPUs, load average {result['loadavg_before']:.2f} before and "
        f"{result['loadavg_after']:.2f} after. Target: a cycle within {CYCLE_SECONDS:.0f} s; the slowest "
        f"took {worst:.2f} s ({'met' if worst <= CYCLE_SECONDS else 'missed'}).",
        "",
        "| cycle | samples sent | seconds | series stored in Prometheus |",
        "|---|---|---|---|",
    ]
    for c in result["cycles"]:
        lines.append(f"| {c['cycle']} | {c['sent']:,} | {c['seconds']:.2f} | {c['stored_series']:,} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--series", type=int, default=100_000, help="series per cycle (default 100000)")
    parser.add_argument("--cycles", type=int, default=3, help="push cycles (default 3)")
    args = parser.parse_args()
    if args.series < 1 or args.cycles < 1:
        parser.error("--series and --cycles must be positive")
    result = run(args)
    text = report(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "push.md").write_text(text + "\n")
    (RESULTS / "push.json").write_text(json.dumps(result, indent=2) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

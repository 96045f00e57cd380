"""The README's "minute by minute" of `make demo`, measured: when each alert of the demo went
pending, fired and was told, counted from the moment the workload starts.

    .venv/bin/python bench/demo_timeline.py                  # about 8 minutes
    .venv/bin/python bench/demo_timeline.py --minutes 6

It runs `kafka-health demo` as `make demo` does (the project's local 3-node Kafka and PostgreSQL,
the daemon, the workload), keeps every line the demo prints with the second it came, and polls
the daemon's database every 2 s: evaluation runs (collection_runs, job 'evaluate'), each alert's
first pending, firing and resolved times, and each notice's send time (notification_outbox).
After `--minutes` it stops the demo as Ctrl-C does (SIGINT) and prints Markdown on stdout
(progress on stderr); it also writes bench/results/demo-timeline.md and .json.

The workload's start (0:00) is its line "workload started on ...", the moment the demo's own
timeline (a broker stopped at +2:00, another at +4:00) counts from. An alert's row keeps its
first pending time of this run and its firing time of this run (rows of an earlier demo run on
the same database that ended before it are left out; one still open shows its earlier times: run
it on a fresh `KAFKA_HEALTH_VAR` for the story of a first run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from monitor.core.settings import DEFAULT_DEV_POSTGRES_PORT
from monitor.devtools.paths import var_dir
from monitor.devtools.postgres import LocalPostgres

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
START_MARK = "workload started on"
"""The workload's first line about itself: the demo's 0:00."""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Lines:
    """The demo's terminal, each line with the wall time it came."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[tuple[float, str]] = []
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self.lines.append((time.time(), line.rstrip()))

    def start(self) -> float | None:
        return next((at for at, line in list(self.lines) if START_MARK in line.lower()), None)


def _poll(engine: Any, seen: dict[str, Any], began: float) -> None:
    with engine.connect() as conn:
        for row in conn.execute(
            text("SELECT started_at, finished_at FROM collection_runs WHERE job = 'evaluate'")
        ):
            seen["evaluations"][row.started_at.isoformat()] = (row.finished_at or row.started_at).timestamp()
        for row in conn.execute(
            text("SELECT rule, entity_key, severity, pending_since, starts_at, resolved_at FROM alerts")
        ):
            pending = row.pending_since.timestamp()
            if row.resolved_at is not None and row.resolved_at.timestamp() < began:
                continue  # an episode of an earlier run, over before this one began
            key = f"{row.rule} {row.entity_key}"
            entry = seen["alerts"].setdefault(key, {"rule": row.rule, "entity": row.entity_key})
            entry["severity"] = row.severity
            entry.setdefault("pending", pending)  # before 0:00: open since an earlier run
            for name, at in (("firing", row.starts_at), ("resolved", row.resolved_at)):
                if at is not None and at.timestamp() >= began:
                    entry.setdefault(name, at.timestamp())
        for row in conn.execute(
            text("SELECT receiver, kind, sent_at FROM notification_outbox WHERE sent_at IS NOT NULL")
        ):
            seen["notices"].setdefault(
                f"{row.receiver} {row.kind} {row.sent_at.isoformat()}", row.sent_at.timestamp()
            )


def _clock(seconds: float) -> str:
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    return f"{sign}{int(seconds // 60)}:{int(seconds % 60):02d}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=7.5, help="how long the demo runs (default 7.5)")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    process = subprocess.Popen(
        [str(ROOT / ".venv" / "bin" / "kafka-health"), "demo"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )  # fmt: skip
    lines = Lines(process)
    engine = create_engine(LocalPostgres(var_dir() / "postgres", DEFAULT_DEV_POSTGRES_PORT).url())
    seen: dict[str, Any] = {"evaluations": {}, "alerts": {}, "notices": {}}
    began = time.time()
    try:
        while True:
            time.sleep(2)
            if process.poll() is not None:
                _say("the demo ended early:\n" + "\n".join(line for _, line in lines.lines[-30:]))
                return 1
            start = lines.start()
            if start is not None and time.time() - start > args.minutes * 60:
                break
            if time.time() - began > args.minutes * 60 + 600:
                _say("the workload never started:\n" + "\n".join(line for _, line in lines.lines[-30:]))
                return 1
            try:
                _poll(engine, seen, began)
            except SQLAlchemyError as exc:
                if start is not None:
                    _say(f"database not answering yet: {type(exc).__name__}")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
        engine.dispose()
    start = lines.start()
    assert start is not None
    load_after = os.getloadavg()[0]
    report = _report(start, lines.lines, seen, load_before, load_after)
    print(report)
    (RESULTS / "demo-timeline.md").write_text(report + "\n")
    (RESULTS / "demo-timeline.json").write_text(
        json.dumps({"start": start, **seen}, indent=1, default=str) + "\n"
    )
    return 0


def _report(
    start: float, lines: list[tuple[float, str]], seen: dict[str, Any], before: float, after: float
) -> str:
    when = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        f"`make demo` timeline, {when}, {platform.node()} ({os.cpu_count()} cores), "
        f"load average {before:.1f} at the start, {after:.1f} at the end. Times from the workload's start.",
        "",
        "Evaluations finished at: "
        + ", ".join(_clock(at - start) for at in sorted(seen["evaluations"].values()) if at >= start - 60),
        "",
        "| alert | entity | severity | pending | firing | resolved |",
        "|---|---|---|---:|---:|---:|",
    ]
    alerts = sorted(seen["alerts"].values(), key=lambda a: (a.get("firing", a["pending"]), a["rule"]))
    for alert in alerts:
        cells = [_clock(alert[k] - start) if k in alert else "" for k in ("pending", "firing", "resolved")]
        out.append(
            f"| {alert['rule']} | `{alert['entity']}` | {alert['severity']} | " + " | ".join(cells) + " |"
        )
    notices = sorted(
        ((k, at) for k, at in seen["notices"].items() if at >= start - 120), key=lambda kv: kv[1]
    )
    told = ", ".join(f"{' '.join(key.split(' ')[:2])} {_clock(at - start)}" for key, at in notices)
    out += ["", f"Notices sent: {told}", "", "The demo's terminal (from the workload's start):", "", "```"]
    out += [f"{_clock(at - start):>6} {line}" for at, line in lines if at >= start - 5]
    out.append("```")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())

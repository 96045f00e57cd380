"""Every benchmark in one command, then one results table and the plots.

    .venv/bin/python bench/run.py                  # every script at its default sizes (over an hour)
    .venv/bin/python bench/run.py --quick          # small sizes: a few minutes per script
    .venv/bin/python bench/run.py --only ingest,alerts,web
    .venv/bin/python bench/run.py --no-run         # only summarise the JSON already in bench/results/
    .venv/bin/python bench/run.py --no-run --publish   # and copy the table and plots to docs/bench/

Runs bench/ingest.py, alerts.py, silences.py, web.py, collector.py, fresh_visible.py, evaluate.py (its
default fleet, and a still one: evaluate-still), push.py, detect.py, storage.py and footprint.py one
after the other (each starts and stops its own servers;
their output goes to this terminal). A script that fails is reported as failed and the others still
run. Then it reads each
script's JSON from bench/results/ and writes bench/results/summary.md and summary.json (benchmark,
input size, cost, target, met, when measured) and one PNG per benchmark into bench/results/plots/. A
benchmark that did not run this time keeps the rows of its last run, with their date (from its JSON
in bench/results/, else its JSON published in docs/bench/, else the published
docs/bench/summary.json). `--publish` copies the table, the plots and each script's own report
(Markdown and JSON) into docs/bench/ and rewrites the table between the markers in README.md.

The plots need matplotlib: `make bench` installs the `bench` extra (`pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make `bench.summary` importable
    sys.path.insert(0, str(ROOT))

from bench import summary  # noqa: E402

RESULTS = ROOT / "bench" / "results"
PUBLISHED = ROOT / "docs" / "bench"
README = ROOT / "README.md"
MARKERS = ("<!-- bench-results:start -->", "<!-- bench-results:end -->")

# name -> (script, quick arguments, full arguments); run in this order, cheapest first.
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "ingest": ("ingest.py", ["--cycles", "3"], []),
    "alerts": ("alerts.py", ["--findings", "1000", "10000", "--notifications", "500", "--rounds", "10"], []),
    "silences": ("silences.py", ["--silences", "100", "1000", "--alerts", "2000", "--costly", "5"], []),
    "web": ("web.py", ["--sizes", "100,1000", "--requests", "50", "--max-seconds", "5"], []),
    "metrics": (
        "web.py",
        ["--sizes", "1000", "--only", "metrics", "--concurrency", "1,4", "--output", "metrics"],
        ["--sizes", "10000", "--only", "metrics", "--concurrency", "1,4", "--output", "metrics"],
    ),
    "collector": ("collector.py", ["--sizes", "1000,10000"], []),
    "fresh-visible": ("fresh_visible.py", ["--quick"], []),
    "evaluate": ("evaluate.py", ["--sizes", "100000,1000000"], []),
    "evaluate-still": (
        "evaluate.py",
        ["--sizes", "100000", "--still", "1", "--runs", "3"],
        ["--sizes", "100000,1000000", "--still", "1", "--runs", "3"],
    ),
    "push": ("push.py", ["--series", "20000", "--cycles", "2"], []),
    "detect": ("detect.py", ["--idle", "60"], []),
    "storage": ("storage.py", ["--sizes", "10000,100000"], ["--sizes", "10000,100000,1000000"]),
    "footprint": ("footprint.py", ["--settle", "30", "--steady", "60"], []),
    "history-brackets": ("history_brackets.py", ["--partitions", "20"], []),
}
PORT_OPTION = {
    "ingest": 0,
    "alerts": 1,
    "web": 2,
    "metrics": 3,
    "silences": 4,
    "storage": 5,
    "history-brackets": 6,
}
"""Scripts that take --port for their PostgreSQL: its offset from --port-base."""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def command(name: str, quick: bool, port_base: int | None) -> list[str]:
    script, quick_args, full_args = BENCHMARKS[name]
    args = [sys.executable, str(ROOT / "bench" / script), *(quick_args if quick else full_args)]
    if port_base is not None and name in PORT_OPTION:
        args += ["--port", str(port_base + PORT_OPTION[name])]
    return args


def run_all(names: list[str], quick: bool, port_base: int | None) -> dict[str, str]:
    """Run each benchmark; return name -> what happened, for the table's header."""
    status = {}
    for name in names:
        argv = command(name, quick, port_base)
        output = RESULTS / f"{name}.json"
        before = output.stat().st_mtime if output.exists() else None
        _log(f"== {name}: {' '.join(argv[1:])}")
        started = time.monotonic()
        try:
            code = subprocess.run(argv, cwd=ROOT, check=False).returncode
        except KeyboardInterrupt:
            status[name] = "interrupted"
            raise
        finally:
            seconds = time.monotonic() - started
        fresh = output.exists() and output.stat().st_mtime != before
        if code == 0 and fresh:
            status[name] = f"ok ({seconds:.0f} s)"
        elif code == 0:
            status[name] = f"ran ({seconds:.0f} s) but wrote no {output.name}"
        else:
            kept = " (its rows are from an earlier run)" if output.exists() and not fresh else ""
            status[name] = f"FAILED (exit {code} after {seconds:.0f} s){kept}"
        _log(f"== {name}: {status[name]}")
    return status


def machine(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except OSError:
        pass
    described = [d["machine"] for d in documents.values() if isinstance(d.get("machine"), dict)]
    versions = [m["postgresql"] for m in described if m.get("postgresql")]
    return {
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory": memory,
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "postgresql": versions[0] if versions else "unknown",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg": os.getloadavg()[0],
    }


def summarize(results: Path, status: dict[str, str], plots_dir: Path) -> tuple[str, list[Path]]:
    """Write summary.md and summary.json into `results` and the plots into `plots_dir`."""
    documents = summary.load(results, PUBLISHED)
    info = machine(documents)
    table = summary.rows(documents, PUBLISHED / "summary.json")
    text = summary.markdown(table, info, status)
    results.mkdir(parents=True, exist_ok=True)
    (results / "summary.md").write_text(text)
    (results / "summary.json").write_text(json.dumps(summary.document(table, info, status), indent=2) + "\n")
    try:
        from bench import plots
    except ImportError as exc:
        _log(f"no plots: {exc}; install the bench extra (make bench, or pip install -e '.[bench]')")
        return text, []
    return text, plots.draw(documents, plots_dir, f"Measured on {summary.machine_text(info)}")


def publish(results: Path, pngs: list[Path], target: Path, readme: Path) -> None:
    """Copy the table and the plots to `target` and put the table between README's markers."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("summary.md", "summary.json"):
        shutil.copyfile(results / name, target / name)
    for name in summary.READERS:  # each script's own report: every figure behind the table's rows
        for report in (results / f"{name}.md", results / f"{name}.json"):
            if report.exists():
                shutil.copyfile(report, target / report.name)
    for png in pngs:
        shutil.copyfile(png, target / png.name)
    if readme.exists():
        readme.write_text(with_table(readme.read_text(), (results / "summary.md").read_text()))


def with_table(readme: str, table: str) -> str:
    """`readme` with the text between the markers replaced by `table` (its heading dropped)."""
    start, end = MARKERS
    if start not in readme or end not in readme:
        return readme
    body = table.split("\n", 2)[2] if table.startswith("## ") else table
    head, rest = readme.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body.strip()}\n{end}{tail}"


def _names(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}"
        )
    return names


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (minutes in all)")
    parser.add_argument("--only", type=_names, help="run only these, comma-separated")
    parser.add_argument("--skip", type=_names, default=[], help="do not run these, comma-separated")
    parser.add_argument("--no-run", action="store_true", help="run nothing; summarise the JSON already there")
    parser.add_argument(
        "--port-base",
        type=int,
        help="PostgreSQL ports for ingest, alerts, web, metrics and silences: this one and the next four",
    )
    parser.add_argument("--publish", action="store_true", help="copy the table and plots to docs/bench/")
    args = parser.parse_args()
    names = [] if args.no_run else [n for n in (args.only or BENCHMARKS) if n not in args.skip]
    status = run_all(names, args.quick, args.port_base)
    text, pngs = summarize(RESULTS, status, RESULTS / "plots")
    print(text)
    _log(f"wrote {RESULTS / 'summary.md'}, summary.json and {len(pngs)} plots in {RESULTS / 'plots'}")
    if args.publish:
        publish(RESULTS, pngs, PUBLISHED, README)
        _log(f"published to {PUBLISHED} and {README.name}")
    return 1 if any(s.startswith("FAILED") for s in status.values()) else 0


if __name__ == "__main__":
    sys.exit(main())

"""The Spark driver as the daemon starts it with `spark.driver_memory: auto`: a JVM whose heap is
the one chosen for the fleet, with its collector (the parallel one for a small fleet, G1 with the
options that give unused heap back above), and that runs a job.

A process holds one JVM for every SparkSession it builds, and the test session's is already
running with its own heap, so the driver starts in a child Python process that reports the JVM
it started (its command line, from /proc) and the answer of a small job.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from monitor.devtools.jdbc import ensure_jdbc_driver

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CHILD = """
import json, os, sys
from pathlib import Path
from monitor.core.settings import SparkConfig
from monitor.evaluate.spark import build_session

session = build_session(SparkConfig(master="local[1]"), Path(sys.argv[1]), int(sys.argv[2]))
answer = session.range(1000).selectExpr("sum(id) AS total").collect()[0]["total"]
me = str(os.getpid())
java = []
for entry in Path("/proc").iterdir():
    try:
        if entry.name.isdigit() and (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == me:
            words = (entry / "cmdline").read_bytes().decode().split("\\0")
            if words[0].endswith("java"):
                java = words
    except OSError:
        pass
print(json.dumps({"answer": answer, "java": java, "memory": session.conf.get("spark.driver.memory")}))
session.stop()
"""


@pytest.mark.parametrize(
    ("rows", "heap", "collector"),
    [
        (11_000, "1024m", ["-XX:+UseSerialGC", "-XX:MaxHeapFreeRatio=40", "-XX:MinHeapFreeRatio=20"]),
        (101_000, "1536m", ["-XX:+UseG1GC", "-XX:G1PeriodicGCInterval=60000"]),
    ],
)
def test_an_auto_driver_starts_with_the_heap_and_collector_of_its_fleet(
    rows: int, heap: str, collector: list[str]
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(ensure_jdbc_driver()), str(rows)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    started = json.loads(done.stdout.strip().splitlines()[-1])
    assert started["answer"] == sum(range(1000))
    assert started["memory"] == heap
    assert f"-Xmx{heap}" in started["java"]
    assert all(option in started["java"] for option in collector), started["java"]
    other = "G1" if "-XX:+UseSerialGC" in collector else "-XX:+UseSerialGC"
    assert not any(other in word for word in started["java"]), started["java"]

"""The daemon's start puts the lag first: the store, the web server, the collectors and the
scheduler (the offsets job's first run starts at once), then the stages that schedule jobs; Spark, whose import and
JVM take seconds, is neither imported while the daemon is wired nor started before the
collectors' first answer, and the scheduler stops before any stage."""

from __future__ import annotations

import json
import subprocess
import sys

from monitor.app import build_app
from monitor.core.lifecycle import AfterFirstAnswer
from monitor.core.settings import load_settings

NOWHERE = "postgresql+psycopg://nobody@127.0.0.1:9/none"

WIRED = f"""
import json, sys
from monitor.app import build_app
from monitor.core.settings import load_settings
app = build_app(load_settings(None), {NOWHERE!r})
print(json.dumps(sorted(sys.modules)))
"""


def test_the_stages_start_lag_first_and_spark_after_the_first_answer() -> None:
    app = build_app(load_settings(None), NOWHERE)
    names = [component.name for component in app.components]
    assert names == ["store", "web", "collect", "scheduler", "alert", "act", "after the first answer",
                     "the scheduler's jobs"]  # fmt: skip
    later = app.components[names.index("after the first answer")]
    assert isinstance(later, AfterFirstAnswer)
    assert [build().name for build in later._later] == ["evaluate"]


def test_wiring_the_daemon_imports_neither_spark_nor_the_web_framework() -> None:
    # A process of its own: this one has imported both for other tests.
    done = subprocess.run([sys.executable, "-c", WIRED], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    modules = json.loads(done.stdout)
    assert "monitor.collect.stage" in modules
    heavy = (
        "pyspark",
        "py4j",
        "fastapi",
        "starlette",
        "uvicorn",
        "monitor.evaluate.stage",
        "monitor.expose.web",
    )
    assert [m for m in modules if m.startswith(heavy)] == []

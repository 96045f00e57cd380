"""SparkSession factory and JDBC plumbing for the evaluate stage.

The same job runs on `local[*]` inside the daemon (session kept warm between cycles) or on any
Spark cluster named by `spark.master`. The PostgreSQL JDBC driver's jar is given by the caller
(`spark.jdbc_jar`, or the one `kafka-health setup` fetches: `monitor.devtools.jdbc`) and put on the
session's classpath.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from monitor.core.errors import ConfigError
from monitor.core.settings import AUTO_MEMORY, SparkConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

JDBC_DRIVER_CLASS = "org.postgresql.Driver"


@dataclass(frozen=True, slots=True)
class JdbcTarget:
    """Where Spark reads and writes: a JDBC URL plus connection properties (with the password)."""

    url: str
    user: str | None
    password: str | None

    def options(self) -> dict[str, str]:
        opts = {"url": self.url, "driver": JDBC_DRIVER_CLASS}
        if self.user:
            opts["user"] = self.user
        if self.password:
            opts["password"] = self.password
        return opts

    def __repr__(self) -> str:  # never show the password
        shown = "***" if self.password else None
        return f"JdbcTarget(url={self.url!r}, user={self.user!r}, password={shown})"


def jdbc_target(sqlalchemy_url: str) -> JdbcTarget:
    """Turn `postgresql+psycopg://user:pw@host:port/db?sslmode=...` into a JDBC target."""
    url = make_url(sqlalchemy_url)
    if not url.drivername.startswith("postgresql"):
        raise ConfigError([f"database.url: Spark reads PostgreSQL only, not {url.drivername}"])
    if not url.host:
        raise ConfigError(
            [
                "database.url: Spark connects over TCP (JDBC), so the URL needs a host; "
                "unix-socket URLs cannot be used by the evaluate stage"
            ]
        )
    query = "&".join(f"{k}={v}" for k, v in sorted(url.query.items()) if isinstance(v, str))
    jdbc = f"jdbc:postgresql://{url.host}:{url.port or 5432}/{url.database or ''}"
    if query:
        jdbc += "?" + query
    return JdbcTarget(url=jdbc, user=url.username, password=url.password)


def sql_conf(config: SparkConfig) -> dict[str, str]:
    """The SQL settings the job relies on (settable on a running session): derived timestamps
    are computed in UTC."""
    return {
        "spark.sql.shuffle.partitions": str(config.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
    }


RETAINED_STATUS = {
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "2000",
    "spark.ui.retainedDeadExecutors": "10",
}
"""How much of its past work the driver keeps for its status pages. The daemon's session runs an
evaluation every 30 s for weeks; at Spark's defaults (1,000 SQL executions, 1,000 jobs and stages,
100,000 tasks) the plans and metrics kept grow its heap by about 18 MB per evaluation until a 1g
driver runs out of memory in well under an hour."""


CODEGEN_CACHE_ENTRIES = "1000"
"""Classes Spark keeps compiled for reuse (`spark.sql.codegen.cache.maxEntries`, 100 by default).
A warm evaluation generates about 300, of which all but a few dozen are the same code as in the
evaluation before: with room for them, a small cluster's warm evaluation compiles 23 classes
instead of 300 (about 10 ms each on a 2-core machine). A static setting: given when the session
is built."""


SMALL_FLEET_ROWS = 20_000
SMALL_HEAP_MB = 1024
"""The heap of a fleet up to 20,000 group-partitions and partitions. At 10,000 group-partitions
on 1,000 partitions, on a quiet machine (docs/bench/footprint.md), a 768m driver used 374 MB less
than a 1g one but its evaluations took 36 s (median) against 22 s, longer than the 30 s
interval: G1 collected again and again in a heap 85 % full. 512m was worse."""
MB_PER_THOUSAND_ROWS = 4
"""Heap per 1,000 rows beyond a small fleet: bench/evaluate.py's 1M group-partitions need 4g."""
HEAP_STEP_MB = 256

QUIET_LOGS = "-Dlog4j2.level=WARN"
"""The driver JVM's log level, in both sets of options below."""

DRIVER_JAVA_OPTIONS = f"{QUIET_LOGS} -XX:+UseG1GC -XX:G1PeriodicGCInterval=60000"
"""The driver JVM's options above a small fleet: quiet logs, and a collection of an idle heap every
minute, which gives back to the system what an evaluation touched and no longer uses. The free
heap is not bounded (MaxHeapFreeRatio): the slow 768m runs bounded it too, and which of the two
slowed them is not measured apart."""

SMALL_HEAP_FREE = "-XX:MaxHeapFreeRatio=40 -XX:MinHeapFreeRatio=20"
"""How much of the small fleet's heap the serial collector keeps free after a full collection: it gives
back what is beyond 40 % free, where the JVM's default (70 %) kept a heap grown by an evaluation's
peak. At 10,000 group-partitions with the evaluation window full (docs/bench/footprint.md,
`base-1204b` against `freeratio-nmt` and `freeratio`) the heap kept 461-466 MB instead of 632 and
the daemon's largest resident size fell from 1,475 to 1,320 MB; its CPU a minute was 22.7 and 25.8
in the two runs against 23.0, a difference runs of the same code also show. Compiling with C1 only
(`-XX:TieredStopAtLevel=1`), which also keeps less code, made the evaluation's tasks three times
slower (docs/bench/evaluation-profile.md)."""

SMALL_DRIVER_JAVA_OPTIONS = f"{QUIET_LOGS} -XX:+UseSerialGC {SMALL_HEAP_FREE}"
"""The driver JVM's options for a small fleet (SMALL_FLEET_ROWS): quiet logs, the serial collector and
SMALL_HEAP_FREE. A small fleet's evaluation is nearly all work on the driver: building and planning
its queries makes short-lived trees of objects, and G1's concurrent marking and refinement of them
took 14 CPU-seconds a minute of a 2,000 group-partition evaluation's 62 (the parallel collector: 5).
At 10,000 group-partitions the whole daemon spent 61 CPU-seconds a minute instead of 71 with the
parallel collector, its JVM peaked at 1,230 MB resident instead of 1,457, and its first evaluation
ended after 157 s instead of 188 (docs/bench/evaluation-profile.md). The serial collector does the
same work on one thread without the parallel one's per-thread structures and heap sizing for
throughput: at 10,000 group-partitions (docs/bench/footprint.md, `in-full` and `serial-gc`, one
after the other) the JVM's largest resident size went from 1,096 to 966 MB, its steady CPU from 23.0
to 19.4 s a minute and the median evaluation from 11.2 to 8.4 s. A larger fleet's heap keeps G1, not
measured against either at that size."""


NO_CALL_SITES = {"spark.python.sql.dataFrameDebugging.enabled": "false"}
"""PySpark's DataFrame debugging off: with it on (the default), every DataFrame and Column call
from Python walks the Python stack and sends its call site to the JVM around the call (four more
round trips, and a failed import of IPython each time) for the context of Spark's error messages.
Building a plan makes about 3,700 such calls (40,000 of its 67,000 round trips): off, a plan of
the shipped rules is built in 11.9 s instead of 17.0 (docs/bench/plan-build.md). The call sites
only add a Python line to Spark's error messages. A static setting (spark-submit: `--conf`);
PySpark reads it once per process, when the first such call finds the session."""


def fleet_heap_mb(rows: int) -> int:
    """The driver heap, in MB, for an evaluation of `rows` group-partitions and partitions:
    1024 up to 20,000 rows, then 4 MB more per 1,000 rows, in steps of 256 MB."""
    if rows <= SMALL_FLEET_ROWS:
        return SMALL_HEAP_MB
    needed = SMALL_HEAP_MB + MB_PER_THOUSAND_ROWS * (rows - SMALL_FLEET_ROWS) / 1000
    return math.ceil(needed / HEAP_STEP_MB) * HEAP_STEP_MB


def driver_java_options(fleet_rows: int) -> str:
    """The driver JVM's options for a fleet of `fleet_rows` group-partitions and partitions:
    SMALL_DRIVER_JAVA_OPTIONS up to SMALL_FLEET_ROWS, else DRIVER_JAVA_OPTIONS."""
    return SMALL_DRIVER_JAVA_OPTIONS if fleet_rows <= SMALL_FLEET_ROWS else DRIVER_JAVA_OPTIONS


def driver_memory(config: SparkConfig, fleet_rows: int) -> str:
    """`spark.driver_memory` as given, or with `auto` the heap for a fleet of `fleet_rows`."""
    return f"{fleet_heap_mb(fleet_rows)}m" if config.driver_memory == AUTO_MEMORY else config.driver_memory


def outgrown(config: SparkConfig, session_rows: int, fleet_rows: int) -> str | None:
    """What to do when an `auto` heap chosen for `session_rows` is too small for `fleet_rows`;
    None while it fits (or the heap was given)."""
    if config.driver_memory != AUTO_MEMORY or fleet_heap_mb(fleet_rows) <= fleet_heap_mb(session_rows):
        return None
    return (
        f"spark.driver_memory auto chose {fleet_heap_mb(session_rows)}m for {session_rows:,} "
        f"group-partitions and partitions when the evaluation started; the fleet has {fleet_rows:,} "
        f"now, which needs {fleet_heap_mb(fleet_rows)}m: an evaluation may run out of heap. Restart "
        "the daemon (auto then sizes the heap to the fleet again) or set spark.driver_memory"
    )


def session_conf(config: SparkConfig, jdbc_jar: Path, fleet_rows: int = 0) -> dict[str, str]:
    """Every setting the session is built with: ours first, then the user's `spark.conf`;
    `fleet_rows` (group-partitions and partitions) sizes an `auto` driver heap."""
    conf = {
        "spark.master": config.master,
        "spark.app.name": config.app_name,
        "spark.driver.memory": driver_memory(config, fleet_rows),
        "spark.executor.memory": config.executor_memory,
        **sql_conf(config),
        "spark.jars": str(jdbc_jar),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1" if config.master.startswith("local") else "0.0.0.0",  # noqa: S104
        "spark.driver.host": "127.0.0.1" if config.master.startswith("local") else "",
        "spark.driver.extraJavaOptions": driver_java_options(fleet_rows),
        **RETAINED_STATUS,
        "spark.sql.codegen.cache.maxEntries": CODEGEN_CACHE_ENTRIES,
        **NO_CALL_SITES,
    }
    conf = {k: v for k, v in conf.items() if v}
    conf.update(config.conf)
    return conf


def build_session(config: SparkConfig, jdbc_jar: Path, fleet_rows: int = 0) -> SparkSession:
    """A SparkSession for `config.master` with the JDBC driver on its classpath and quiet logs,
    its driver heap sized to `fleet_rows` when `spark.driver_memory` is `auto`.

    Blocks while the JVM starts (a few seconds on `local[*]`). Reuses a live session of this
    process if one exists (getOrCreate), so the daemon keeps one warm session.
    """
    from pyspark.sql import SparkSession

    builder: Any = SparkSession.builder
    for key, value in session_conf(config, jdbc_jar, fleet_rows).items():
        builder = builder.config(key, value)
    session: SparkSession = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def submitted_session(config: SparkConfig) -> SparkSession:
    """The session of a job started by spark-submit, which owns the master, the jars, the memory
    and every `--conf`: of this config only the SQL settings (`sql_conf`) and the user's
    `spark.conf` entries of them are applied, each unless spark-submit was given it."""
    from pyspark.sql import SparkSession

    session: SparkSession = SparkSession.builder.getOrCreate()
    submitted = session.sparkContext.getConf()
    wanted = {**sql_conf(config), **{k: v for k, v in config.conf.items() if k.startswith("spark.sql.")}}
    for key, value in wanted.items():
        if submitted.contains(key):
            continue
        if not session.conf.isModifiable(key):
            log.warning("spark.conf %s is ignored under spark-submit: give it with --conf", key)
            continue
        session.conf.set(key, value)
    return session

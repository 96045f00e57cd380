"""SparkSession factory and JDBC plumbing for the evaluate stage.

The same job runs on `local[*]` inside the daemon (session kept warm between cycles) or on any
Spark cluster named by `spark.master`. The PostgreSQL JDBC driver's jar is given by the caller
(`spark.jdbc_jar`, or the one `kafka-health setup` fetches: `monitor.devtools.jdbc`) and put on the
session's classpath.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from monitor.core.errors import ConfigError
from monitor.core.settings import SparkConfig

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


def session_conf(config: SparkConfig, jdbc_jar: Path) -> dict[str, str]:
    """Every setting the session is built with: ours first, then the user's `spark.conf`."""
    conf = {
        "spark.master": config.master,
        "spark.app.name": config.app_name,
        "spark.driver.memory": config.driver_memory,
        "spark.executor.memory": config.executor_memory,
        **sql_conf(config),
        "spark.jars": str(jdbc_jar),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": "127.0.0.1" if config.master.startswith("local") else "0.0.0.0",  # noqa: S104
        "spark.driver.host": "127.0.0.1" if config.master.startswith("local") else "",
        "spark.driver.extraJavaOptions": "-Dlog4j2.level=WARN",
        **RETAINED_STATUS,
        "spark.sql.codegen.cache.maxEntries": CODEGEN_CACHE_ENTRIES,
    }
    conf = {k: v for k, v in conf.items() if v}
    conf.update(config.conf)
    return conf


def build_session(config: SparkConfig, jdbc_jar: Path) -> SparkSession:
    """A SparkSession for `config.master` with the JDBC driver on its classpath and quiet logs.

    Blocks while the JVM starts (a few seconds on `local[*]`). Reuses a live session of this
    process if one exists (getOrCreate), so the daemon keeps one warm session.
    """
    from pyspark.sql import SparkSession

    builder: Any = SparkSession.builder
    for key, value in session_conf(config, jdbc_jar).items():
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

"""The PostgreSQL JDBC driver Spark reads the samples with, fetched from Maven Central by `mvn`."""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.paths import cache_dir, maven_pom

log = logging.getLogger(__name__)


def ensure_jdbc_driver(cache: Path | None = None, report: Callable[[str], None] = log.info) -> Path:
    """Path to the PostgreSQL JDBC jar, fetched from Maven Central on first use.

    Raises DevEnvironmentError when `mvn` is missing or the download fails.
    """
    target = (cache or cache_dir()) / "jdbc"
    existing = sorted(target.glob("postgresql-*.jar"))
    if existing and (target / ".complete").exists():
        return existing[-1]
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevEnvironmentError(
            "mvn (Apache Maven) is needed to fetch the PostgreSQL JDBC driver; install it "
            "(Debian: apt-get install maven) or put a postgresql-*.jar in " + str(target)
        )
    report("fetching the PostgreSQL JDBC driver from Maven Central (once) ...")
    target.mkdir(parents=True, exist_ok=True)
    cmd = [
        mvn, "-q", "-B", "-f", str(maven_pom("jdbc")), "dependency:copy-dependencies",
        f"-DoutputDirectory={target}", "-DincludeScope=runtime",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    jars = sorted(target.glob("postgresql-*.jar"))
    if done.returncode != 0 or not jars:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise DevEnvironmentError(f"fetching the JDBC driver with mvn failed:\n{tail}")
    (target / ".complete").touch()
    return jars[-1]

"""The PostgreSQL JDBC driver Spark reads the samples with: one pinned release, fetched once from
Maven Central over HTTPS by the install step (`kafka-health setup`, which the Dockerfile runs at
build time) and checked against its pinned SHA-256. The daemon only looks for it (`driver_path`),
never fetches at run time; `spark.jdbc_jar` names another jar instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

import httpx

from monitor.core.errors import MonitorError
from monitor.core.resources import cache_dir

log = logging.getLogger(__name__)

VERSION: Final = "42.7.4"
SHA256: Final = "188976721ead8e8627eb6d8389d500dccc0c9bebd885268a3047180274a6031e"
"""Of postgresql-42.7.4.jar as Maven Central serves it (its published SHA-1 is
264310fd7b2cd76738787dc0b9f7ea2e3b11adc1)."""
URL: Final = f"https://repo1.maven.org/maven2/org/postgresql/postgresql/{VERSION}/postgresql-{VERSION}.jar"
TIMEOUT_SECONDS: Final = 60.0
MAX_BYTES: Final = 20 * 1024 * 1024
"""A download larger than this is not the driver (it is about 1 MB)."""


class DriverError(MonitorError):
    """The driver could not be fetched, or what was fetched is not it."""


def driver_path(cache: Path | None = None) -> Path:
    """Where the installed driver is: `<cache>/jdbc/postgresql-<VERSION>.jar` (`cache_dir()`)."""
    return (cache or cache_dir()) / "jdbc" / f"postgresql-{VERSION}.jar"


def fetch(cache: Path | None = None, report: Callable[[str], None] = log.info) -> Path:
    """The installed driver, fetched from Maven Central first when it is missing or not the pinned
    file. Idempotent; the file appears whole or not at all.

    Raises DriverError when the download fails or its checksum differs."""
    target = driver_path(cache)
    if target.is_file() and _sha256(target) == SHA256:
        return target
    report(f"fetching the PostgreSQL JDBC driver {VERSION} from Maven Central (once) ...")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    handle, name = tempfile.mkstemp(dir=target.parent, suffix=".part")
    partial = Path(name)
    try:
        with os.fdopen(handle, "wb") as out, httpx.stream("GET", URL, timeout=TIMEOUT_SECONDS) as answer:
            if answer.status_code != 200:
                raise DriverError(f"fetching {URL} answered HTTP {answer.status_code}")
            for chunk in answer.iter_bytes():
                size += len(chunk)
                if size > MAX_BYTES:
                    raise DriverError(f"{URL} sent more than {MAX_BYTES} bytes: not the driver")
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != SHA256:
            raise DriverError(f"{URL} sent a file whose SHA-256 is {digest.hexdigest()}, not {SHA256}")
        partial.chmod(0o644)  # readable by the user the daemon runs as, not only the installer
        partial.replace(target)
    except httpx.HTTPError as exc:
        raise DriverError(
            f"cannot fetch the PostgreSQL JDBC driver from {URL} ({type(exc).__name__}: {exc}); "
            "check the network, or download it and set spark.jdbc_jar"
        ) from exc
    finally:
        partial.unlink(missing_ok=True)
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as read:
        for block in iter(lambda: read.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

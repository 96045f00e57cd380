"""Fetching a runtime's jars from Maven Central with `mvn`, once, into the download cache."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.paths import maven_pom
from monitor.devtools.processes import TAIL_LINES

_MARKER: Final = ".complete"


def fetch_runtime(
    pom: str, target: Path, main_jar: str, what: str, properties: Mapping[str, str] | None = None
) -> Path:
    """The directory of the jars `maven_pom(pom)` resolves (with the Maven `properties`, e.g. a
    version), fetched into `target` on first use.

    `main_jar` is a glob that must match once the copy is complete. Raises DevEnvironmentError
    naming `what` when `mvn` is missing, the download fails or takes over 30 minutes."""
    if (target / _MARKER).is_file():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevEnvironmentError(
            f"Apache Maven (`mvn`) is not on PATH; it fetches {what} from Maven Central. "
            "Install it (e.g. `apt-get install maven`) and retry."
        )
    staging = target.parent / f"{target.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    command = [
        mvn, "-q", "-B", "-f", str(maven_pom(pom)), "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}", "-DincludeScope=runtime",
        *(f"-D{name}={value}" for name, value in (properties or {}).items()),
    ]  # fmt: skip
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise DevEnvironmentError(f"mvn did not finish fetching {what} within 30 minutes") from exc
    if result.returncode != 0 or not any(staging.glob(main_jar)):
        shutil.rmtree(staging, ignore_errors=True)
        output = (result.stdout + result.stderr).strip().splitlines()[-TAIL_LINES:]
        raise DevEnvironmentError(
            f"mvn failed (exit code {result.returncode}) to fetch {what}; check access to Maven "
            "Central (or your ~/.m2/settings.xml mirror) and that the version exists. Last lines "
            "of its output:\n" + ("\n".join(output) or "(no output)")
        )
    (staging / _MARKER).touch()
    shutil.rmtree(target, ignore_errors=True)
    try:
        staging.rename(target)
    except OSError:  # another process finished first; its copy is as good as ours
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / _MARKER).is_file():
            raise
    return target

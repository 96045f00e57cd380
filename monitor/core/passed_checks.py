"""Checks of operator files that passed, remembered across starts: the daemon's start checks every
rule file (each template compiled and rendered, each SQL expression parsed and typed), a few
tenths of a second before the collectors may start. When neither the files' bytes nor the code
that checks them changed since a start whose check passed, the same check would pass again, so
it is skipped.

What is remembered is one digest per check, under `<state dir>/checked/` (`$KAFKA_HEALTH_VAR`):
of the checked files' bytes and of the package's code (each module's path, size and modification
time, the interpreter's and the checking libraries' versions). A check that failed is never
remembered; a state directory that cannot be written only means the check runs every time.
"""

from __future__ import annotations

import hashlib
import logging
import sys
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

from monitor.core.file_text import MAX_YAML_BYTES
from monitor.core.resources import state_dir

log = logging.getLogger(__name__)

LIBRARIES = ("jinja2", "sqlglot", "pydantic", "PyYAML")
"""The libraries whose behaviour a check's result depends on: a new version checks afresh."""


@cache
def code_stamp() -> str:
    """A digest of the code that checks: the package's modules (path, size, modification time),
    the interpreter's version and LIBRARIES' versions. Read once a process."""
    digest = hashlib.sha256(sys.version.encode())
    for name in LIBRARIES:
        try:
            digest.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{name}=-".encode())
    package = Path(__file__).resolve().parents[1]
    for module in sorted(package.rglob("*.py")):
        stat = module.stat()
        digest.update(f"{module.relative_to(package)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()


def fingerprint(files: Iterable[Path]) -> str | None:
    """The digest of `files` (their names and bytes, in the order given) and of the code
    (`code_stamp`); None when one cannot be read as a regular file of at most MAX_YAML_BYTES (the
    check then runs, and says what is wrong with it)."""
    digest = hashlib.sha256(code_stamp().encode())
    for path in files:
        try:
            if not path.is_file() or path.stat().st_size > MAX_YAML_BYTES:
                return None
            content = path.read_bytes()
        except OSError:
            return None
        digest.update(f"{path.resolve()}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


class PassedChecks:
    """The digests of the checks that passed last, one file per check name in `directory`
    (default `<state dir>/checked`)."""

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory if directory is not None else state_dir() / "checked"

    def passed(self, name: str, digest: str | None) -> bool:
        """Whether the check `name` passed on the inputs of `digest` (a `fingerprint`) last time."""
        if digest is None:
            return False
        try:
            return (self.directory / name).read_text(encoding="ascii").strip() == digest
        except (OSError, UnicodeDecodeError):
            return False

    def remember(self, name: str, digest: str | None) -> None:
        """Keep `digest` as the inputs the check `name` passed on; a directory that cannot be
        written is only logged (the check runs at the next start)."""
        if digest is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            written = self.directory / f".{name}.new"
            written.write_text(digest + "\n", encoding="ascii")
            written.replace(self.directory / name)
        except OSError as exc:
            log.debug("cannot keep the passed %s check in %s: %s", name, self.directory, exc)

"""Test tiers: every test is marked by what it starts, from the fixtures it uses.

- `unit`: a test under tests/unit. It starts no JVM and no server, so the tier runs in under a
  minute (`make test-unit`, or `pytest -m unit`).
- `kafka`, `postgres`, `spark`, `browser`, `receivers`, `metric_servers`: the test uses (directly or through another
  fixture) the fixture in `SERVICE_FIXTURES` that starts that service. `item.fixturenames` is the
  whole fixture closure, so a test cannot use a service without carrying its marker.
- `integration`: a test under tests/integration (real services, subprocesses, daemons).

Two checks keep the `unit` tier honest:

1. at collection, a test under tests/unit whose fixtures start a service is a usage error naming
   the test and the fixture (move it to tests/integration);
2. while a unit test runs, launching a JVM (`java`, `spark-submit`) fails it at once, and after
   its teardown a Java process started under this one, or a new listening TCP socket of this
   process (a server left running), fails it too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).parent

SERVICE_FIXTURES = {
    "kafka_cluster": "kafka",
    "secured_kafka_cluster": "kafka",
    "oidc_provider": "kafka",
    "share_kafka_cluster": "kafka",
    "pg_server": "postgres",
    "spark": "spark",
    "chromium": "browser",
    "receiver_http": "receivers",
    "httpserver": "receivers",
    "make_smtp_server": "receivers",
    "prometheus_server": "metric_servers",
    "alertmanager_server": "metric_servers",
    "moto_server": "metric_servers",
}
"""Fixture -> the marker of what it starts (a JVM, a database server, a browser, local servers)."""

JVM_LAUNCHERS = frozenset({"java", "spark-submit", "spark-class"})
"""Programs that start a JVM; a unit test launching one fails."""


class StartedService(AssertionError):
    """A unit test started a JVM or a server."""


def services_of(item: pytest.Item) -> set[str]:
    """The service markers a test's fixtures call for."""
    names = getattr(item, "fixturenames", ())
    return {marker for fixture, marker in SERVICE_FIXTURES.items() if fixture in names}


def mark_tiers(items: Sequence[pytest.Item]) -> None:
    """Mark every test by its folder and by what its fixtures start; refuse a unit test that
    starts a service."""
    wrong: list[str] = []
    for item in items:
        path = Path(str(item.fspath))
        services = services_of(item)
        for marker in sorted(services):
            item.add_marker(marker)
        if TESTS / "unit" in path.parents:
            if services:
                fixtures = sorted(f for f, m in SERVICE_FIXTURES.items() if m in services)
                wrong.append(f"{item.nodeid} uses {', '.join(fixtures)}")
            item.add_marker(pytest.mark.unit)
        elif TESTS / "integration" in path.parents:
            item.add_marker(pytest.mark.integration)
    if wrong:
        raise pytest.UsageError(
            "unit tests start no JVM and no server, but these do; move them to tests/integration "
            "(or give them a fake instead of the service):\n  " + "\n  ".join(wrong)
        )


# ---------------------------------------------------------------------------------------------
# The guard around each unit test


def _program_of(pid: int) -> str:
    try:
        first = (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return ""  # gone meanwhile
    return os.path.basename(os.fsdecode(first))


def descendants(pid: int) -> dict[int, str]:
    """Every process below `pid` (pid -> its program's base name), from /proc's children lists."""
    below: dict[int, str] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = Path(f"/proc/{parent}/task/{task}/children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in below:
                    below[child] = _program_of(child)
                    todo.append(child)
    return below


def java_children() -> set[int]:
    """Java processes started under this test process."""
    return {child for child, program in descendants(os.getpid()).items() if program == "java"}


def open_sockets() -> set[int]:
    """Inodes of the sockets this process holds open (cheap: one look at /proc/self/fd)."""
    mine: set[int] = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(int(target[len("socket:[") : -1]))
    return mine


def listening(sockets: set[int]) -> set[int]:
    """Those of `sockets` that are TCP sockets listening for connections (the kernel's tables are
    slow to read, so they are read only when there is something to look up)."""
    found: set[int] = set()
    if not sockets:
        return found
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[9]) in sockets:  # 0A: LISTEN
                found.add(int(fields[9]))
    return found


def _program(args: Any) -> str:
    """The path of the program a Popen call runs."""
    first = args if isinstance(args, (str, bytes, os.PathLike)) else next(iter(args), "")
    text = os.fsdecode(first)
    return text.split()[0] if isinstance(args, (str, bytes)) and text else text


def starts_a_jvm(args: Any) -> bool:
    """Whether a Popen call with `args` would start a JVM. A `java` that is a script is a test's
    stand-in for one (it starts no JVM); `spark-submit` and `spark-class` always start one."""
    program = _program(args)
    name = os.path.basename(program)
    if name not in JVM_LAUNCHERS:
        return False
    if name != "java":
        return True
    path = program if os.sep in program else shutil.which(program)
    try:
        with open(path or program, "rb") as head:
            return head.read(2) != b"#!"
    except OSError:
        return True  # not found: Popen fails by itself, but say what was tried


class UnitGuard:
    """Around one unit test: refuses JVM launches, and finds what the test left running."""

    def __init__(self, nodeid: str) -> None:
        self._nodeid = nodeid
        self._popen_init = subprocess.Popen.__init__
        self._java = java_children()
        self._sockets = open_sockets()

    def __enter__(self) -> UnitGuard:
        original = self._popen_init
        nodeid = self._nodeid

        def guarded(popen: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> None:
            if starts_a_jvm(args):
                raise StartedService(
                    f"{nodeid} is a unit test and launched {_program(args)!r} (a JVM): use a fake, or "
                    "move the test to tests/integration"
                )
            original(popen, args, *rest, **options)

        subprocess.Popen.__init__ = guarded  # type: ignore[assignment,method-assign]
        return self

    def __exit__(self, *_: object) -> None:
        subprocess.Popen.__init__ = self._popen_init  # type: ignore[method-assign]

    def left_running(self) -> list[str]:
        """What the test started and did not stop."""
        found = []
        java = java_children() - self._java
        if java:
            found.append(f"Java process(es) {sorted(java)}")
        servers = listening(open_sockets() - self._sockets)
        if servers:
            found.append(f"{len(servers)} listening socket(s) of the test process (a server)")
        return found


_GUARD = pytest.StashKey[UnitGuard]()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_tiers(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("unit") is not None:
        item.stash[_GUARD] = UnitGuard(item.nodeid).__enter__()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A unit test that left a JVM or a server running fails in its teardown."""
    try:
        return (yield)
    finally:
        guard = item.stash.get(_GUARD, None)
        if guard is not None:
            del item.stash[_GUARD]
            guard.__exit__()
            left = guard.left_running()
            if left:
                raise StartedService(
                    f"{item.nodeid} is a unit test and left running: {'; '.join(left)}. Unit tests "
                    "start no JVM and no server: use a fake, or move the test to tests/integration"
                )

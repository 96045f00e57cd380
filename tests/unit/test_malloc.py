"""The daemon limits its malloc arenas and those of the Spark JVM it starts
(monitor/core/malloc.py): MALLOC_ARENA_MAX set for the processes it starts unless the operator
set it, and applied to itself through glibc's mallopt."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from monitor.core.malloc import ARENAS, limit_arenas


def test_unset_it_is_set_for_the_children_and_applied_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    applied = limit_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == str(ARENAS)
    if platform.libc_ver()[0] == "glibc":
        assert applied == ARENAS
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ['MALLOC_ARENA_MAX'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert child.stdout.strip() == str(ARENAS), "a process the daemon starts (the JVM) inherits it"


def test_an_operators_value_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    applied = limit_arenas()
    assert os.environ["MALLOC_ARENA_MAX"] == "4"
    assert applied in (4, None)


@pytest.mark.parametrize("value", ["many", "0", "-1"])
def test_a_value_that_is_no_limit_leaves_malloc_as_it_is(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", value)
    assert limit_arenas() is None
    assert os.environ["MALLOC_ARENA_MAX"] == value


def test_trim_gives_freed_heap_pages_back() -> None:
    """Memory freed in the middle of the heap stays resident until trimmed (a child process, so that
    the tests' own heap does not count). Elsewhere than glibc there is nothing to trim."""
    if platform.libc_ver()[0] != "glibc":
        from monitor.core.malloc import trim

        assert trim() is False
        return
    code = (
        "import ctypes\n"
        "from monitor.core.malloc import trim\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.malloc.restype = ctypes.c_void_p\n"
        "libc.free.argtypes = [ctypes.c_void_p]\n"
        "def rss():\n"
        "    return int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])\n"
        "blocks = [libc.malloc(64 * 1024) for _ in range(2000)]\n"  # under mmap's threshold: the heap
        "for b in blocks:\n"
        "    ctypes.memset(b, 1, 64 * 1024)\n"
        "for b in blocks[:-1]:\n"
        "    libc.free(b)\n"  # the last block keeps the heap's top: only a trim returns the rest
        "before = rss()\n"
        "assert trim() is True\n"
        "print(before - rss())\n"
    )
    freed_kb = int(
        subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True).stdout
    )
    assert freed_kb > 64 * 1000  # most of the 125 MB freed


def test_a_long_job_is_followed_by_a_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    from monitor.core import scheduler as module

    trims: list[str] = []
    monkeypatch.setattr(module, "trim", lambda: trims.append("trim") or True)
    s = module.Scheduler(max_workers=1)
    s.every("short", 3600, lambda: None)
    s.every("long", 3600, lambda: None)
    monkeypatch.setattr(module, "TRIM_AFTER_SECONDS", 3600.0)
    s._run_claimed("short")
    assert trims == []
    monkeypatch.setattr(module, "TRIM_AFTER_SECONDS", 0.0)
    s._run_claimed("long")
    assert trims == ["trim"]

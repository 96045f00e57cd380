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

"""Fewer malloc arenas for the daemon and the Spark JVM it starts.

glibc's malloc gives each thread that allocates concurrently an arena of its own, up to eight per
CPU, and memory freed in one arena is not reused by the others: a long-running process with many
threads (the daemon's scheduler pool, web workers, the commit stream; the JVM's compiler, GC and
task threads) keeps tens to hundreds of megabytes resident that it no longer uses. Two arenas is
what JVM and Python services commonly run with (`MALLOC_ARENA_MAX=2`): at 10,000 group-partitions
the whole daemon's largest resident size went down by about 55 MB (docs/bench/footprint.md,
`arena2`), for no measured cost in CPU.

After a long job (an evaluation, an alert cycle: `monitor.core.scheduler`) the daemon also gives
the free pages of malloc's heaps back to the system (`trim`, glibc's `malloc_trim`): what a job
freed otherwise stays resident until malloc happens to reuse it (about 30 MB of the daemon's
Python process at 10,000 group-partitions, for well under a millisecond a call).

The daemon sets it for itself (`mallopt`, for the arenas of the threads it starts from then on)
and in its environment, which the Spark JVM inherits when it starts; an operator's own
`MALLOC_ARENA_MAX` is kept. Elsewhere than glibc (musl) nothing changes.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
from collections.abc import Callable

log = logging.getLogger(__name__)

ARENAS = 2
"""Arenas the daemon and its JVM use unless MALLOC_ARENA_MAX says otherwise."""

_M_ARENA_MAX = -8
"""glibc's mallopt parameter for the largest number of arenas (malloc.h)."""


def limit_arenas() -> int | None:
    """Limit this process's malloc arenas and those of the processes it starts to
    `MALLOC_ARENA_MAX` (set to ARENAS when unset); the limit, or None where malloc is not glibc's
    or the value is not a positive number."""
    value = os.environ.setdefault("MALLOC_ARENA_MAX", str(ARENAS))
    try:
        arenas = int(value)
    except ValueError:
        log.warning("MALLOC_ARENA_MAX=%r is not a number: malloc's own default is kept", value)
        return None
    if arenas <= 0:
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc: the child processes read the variable, if at all
        return None
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return arenas if mallopt(_M_ARENA_MAX, arenas) == 1 else None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, looked up once; None elsewhere."""
    try:
        function = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return function


def trim() -> bool:
    """Return the free memory of every malloc arena to the system (glibc's `malloc_trim(0)`);
    whether anything was returned. Elsewhere than glibc nothing happens."""
    function = _malloc_trim()
    return function is not None and function(0) == 1

"""Python's cyclic garbage collector held off while a collection run builds its samples.

A run at 100,000 group-partitions makes a few million objects that live on (the samples the next
cycle compares with). Each time enough of them pile up, the collector walks every tracked object
of the process: on a cold start eight such full collections cost about 0.9 s of a 3.3 s first
answer, and they find next to nothing to free (the samples hold no reference cycles: reference
counting frees the previous cycle's). Held off for the run, the collector catches up afterwards,
in one pass, off the path to the answer.

Threads may hold it at once (several clusters' runs): it runs again when the last one is done, and
a pause that has lasted `LONGEST_PAUSE_SECONDS` (runs overlapping without end) makes the next one
to start collect first, so cyclic garbage of the other threads (web requests, the evaluation)
never waits long. When something else had already turned the collector off, it is left off.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

LONGEST_PAUSE_SECONDS = 30.0
"""The longest the collector stays held off while runs keep overlapping."""

_lock = threading.Lock()
_holders = 0
_since = 0.0
_ours = False
"""The collector was on when the first holder came: the pause turned it off and turns it on."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector off for the block (see the module's docstring)."""
    _hold()
    try:
        yield
    finally:
        _release()


def _hold() -> None:
    global _holders, _since, _ours
    with _lock:
        now = time.monotonic()
        if _holders == 0:
            _ours = gc.isenabled()
            _since = now
            if _ours:
                gc.disable()
        elif _ours and now - _since >= LONGEST_PAUSE_SECONDS:
            gc.collect()
            _since = now
        _holders += 1


def _release() -> None:
    global _holders
    with _lock:
        _holders -= 1
        if _holders == 0 and _ours:
            gc.enable()

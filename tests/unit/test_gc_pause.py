"""The cyclic garbage collector held off during collection runs (monitor.core.gc_pause)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from monitor.core import gc_pause
from monitor.core.gc_pause import gc_paused


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_the_collector_is_off_while_held_and_on_again_after() -> None:
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_it_comes_back_when_the_last_of_several_holders_is_done() -> None:
    first_in, release_first = threading.Event(), threading.Event()

    def first() -> None:
        with gc_paused():
            first_in.set()
            release_first.wait(5)

    thread = threading.Thread(target=first)
    thread.start()
    assert first_in.wait(5)
    with gc_paused():
        pass
    assert not gc.isenabled(), "the first holder is still inside"
    release_first.set()
    thread.join(5)
    assert gc.isenabled()


def test_a_collector_turned_off_by_someone_else_stays_off() -> None:
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_a_pause_that_lasts_collects_when_the_next_holder_comes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_pause, "LONGEST_PAUSE_SECONDS", 0.0)
    collections: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            collections.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        with gc_paused():
            with gc_paused():
                assert collections and collections[-1] == 2, "a full collection when the second came"
                assert not gc.isenabled()
            assert not gc.isenabled()
    finally:
        gc.callbacks.remove(seen)
    assert gc.isenabled()


def test_an_error_inside_still_turns_it_back_on() -> None:
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("the run failed")
    assert gc.isenabled()

"""`Pacing`: a periodic job whose runs take long rests in proportion before its next run, unless
its input changed; a quick job runs at every tick."""

from __future__ import annotations

from monitor.core.scheduler import Pacing


def test_the_first_tick_runs() -> None:
    assert Pacing(2.0).due(0.0, None)


def test_after_a_long_run_the_next_waits_twice_as_long_unless_the_input_changed() -> None:
    pacing = Pacing(2.0)
    pacing.ran(100.0, 110.0, "a")  # 10 s

    assert not pacing.due(115.0, "a")
    assert not pacing.due(129.9, "a")
    assert pacing.due(130.0, "a")
    assert pacing.due(115.0, "b")  # new input: at once


def test_a_quick_job_runs_at_every_tick() -> None:
    pacing = Pacing(2.0)
    for tick in range(5):
        assert pacing.due(10.0 * tick, "same")
        pacing.ran(10.0 * tick, 10.0 * tick + 0.02, "same")


def test_rested_ignores_the_input_a_job_that_waits_for_the_rest_whatever_changed() -> None:
    pacing = Pacing(2.0)
    assert pacing.rested(0.0)
    pacing.ran(100.0, 110.0, "a")
    assert not pacing.rested(129.9)
    assert pacing.rested(130.0)

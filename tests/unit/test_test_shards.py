"""The suite's shards (tests/shards.py): whole modules, balanced by their recorded time, the same
assignment in every shard, and a clear error for a bad `--shard`."""

from __future__ import annotations

import pytest

from tests.shards import UNKNOWN_TEST_SECONDS, assign, parse_shard

pytestmark = pytest.mark.unit


def test_the_longest_modules_go_first_each_to_the_least_loaded_shard() -> None:
    known = {"a.py": 100.0, "b.py": 60.0, "c.py": 50.0, "d.py": 10.0}
    placed = assign({m: 1 for m in known}, known, 2)
    assert placed == {"a.py": 0, "b.py": 1, "c.py": 1, "d.py": 0}
    loads = [sum(known[m] for m, s in placed.items() if s == shard) for shard in (0, 1)]
    assert loads == [110.0, 110.0]


def test_modules_sharing_a_costly_session_fixture_go_to_one_shard_together() -> None:
    known = {"a.py": 100.0, "b.py": 90.0, "c.py": 50.0, "d.py": 40.0, "e.py": 10.0}
    apart = assign({m: 1 for m in known}, known, 2)
    assert apart["a.py"] != apart["b.py"]
    together = [{"a.py", "b.py"}, {"b.py", "e.py"}, {"gone.py"}]  # b.py joins the first two sets
    placed = assign({m: 1 for m in known}, known, 2, together)
    assert placed["a.py"] == placed["b.py"] == placed["e.py"]
    assert placed["c.py"] == placed["d.py"] != placed["a.py"]
    assert set(placed) == set(known)


def test_a_module_without_a_recorded_time_counts_its_tests() -> None:
    placed = assign({"old.py": 1, "new.py": 40}, {"old.py": 50.0}, 2)
    assert 40 * UNKNOWN_TEST_SECONDS > 50.0
    assert placed == {"new.py": 0, "old.py": 1}


def test_every_shard_makes_the_same_assignment_whatever_the_order_of_its_modules() -> None:
    known = {f"m{i}.py": float(i % 7) for i in range(30)}
    forward = assign({m: 2 for m in known}, known, 3)
    backward = assign({m: 2 for m in reversed(list(known))}, known, 3)
    assert forward == backward and set(forward.values()) == {0, 1, 2}


@pytest.mark.parametrize("value", ["2", "0/2", "3/2", "a/b", "1/2/3"])
def test_a_bad_shard_is_a_usage_error_that_says_the_form(value: str) -> None:
    with pytest.raises(pytest.UsageError, match="--shard"):
        parse_shard(value)


def test_a_good_shard_parses() -> None:
    assert parse_shard("2/3") == (2, 3)

"""Shards: `pytest --shard K/N` runs the K-th of N parts of the suite, so that N sessions, each with
its own services (scripts/test-shards.sh gives each its own state directory and ports), run the
suite side by side.

A test module stays whole in one shard: its module-scoped fixtures start clusters, daemons and
workloads that a split would start twice. Modules go to shards by their time in an earlier whole
run (`tests/durations.json`, written by `scripts/test-durations.py` from a JUnit report), the
longest first, each to the shard with the least time so far; a module the file does not know
counts `UNKNOWN_TEST_SECONDS` per test. Modules that use one of the session fixtures of
`KEPT_TOGETHER` (a workload, a cluster or a database only some modules need) go to one shard
together, so it is made once per run, not once per shard. Every shard collects the same tests, so
every shard makes the same assignment.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pytest

DURATIONS = Path(__file__).parent / "durations.json"
UNKNOWN_TEST_SECONDS = 2.0
"""What a test of a module missing from the durations file is taken to cost."""
KEPT_TOGETHER = ("lag_workload", "share_kafka_cluster", "secured_kafka_cluster", "populated")
"""Session fixtures that take minutes to make and serve a few modules: the lagging groups' workload
(about 200 s), the share-group cluster, the secured cluster and the populated database (its
collections, a cold evaluation and an alert cycle: 70 to 130 s, made in each shard that had one of
its eleven modules)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--shard",
        default=None,
        metavar="K/N",
        help="run the K-th (1-based) of N parts of the collected tests, whole modules balanced by "
        "tests/durations.json",
    )


def parse_shard(value: str) -> tuple[int, int]:
    """`K/N` -> (K, N); a clear usage error otherwise."""
    try:
        k, n = (int(part) for part in value.split("/"))
    except ValueError:
        raise pytest.UsageError(f"--shard {value!r}: expected K/N, e.g. 1/2") from None
    if not 1 <= k <= n:
        raise pytest.UsageError(f"--shard {value!r}: K must be between 1 and N")
    return k, n


def assign(
    modules: dict[str, int], known: dict[str, float], shards: int, together: Iterable[set[str]] = ()
) -> dict[str, int]:
    """Module -> shard index (0-based): the longest unit first, each to the least loaded shard. A
    unit is a module, or the modules of a set of `together` (sets that share a module merge).
    `modules` maps a module's path to its number of collected tests."""
    cost = {m: known.get(m, UNKNOWN_TEST_SECONDS * count) for m, count in modules.items()}
    units: list[set[str]] = []
    for group in [*together, *({m} for m in modules)]:
        group = {m for m in group if m in modules}
        joined = [u for u in units if u & group]
        for unit in joined:
            units.remove(unit)
            group |= unit
        if group:
            units.append(group)
    load = [0.0] * shards
    placed: dict[str, int] = {}
    for unit in sorted(units, key=lambda u: (-sum(cost[m] for m in u), min(u))):
        target = min(range(shards), key=lambda s: (load[s], s))
        for module in unit:
            placed[module] = target
        load[target] += sum(cost[m] for m in unit)
    return placed


def _durations() -> dict[str, float]:
    if not DURATIONS.exists():
        return {}
    return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text()).items()}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    value = config.getoption("--shard")
    if not value:
        return
    k, n = parse_shard(value)
    module = {item: item.nodeid.split("::", 1)[0] for item in items}
    sharing: dict[str, set[str]] = {name: set() for name in KEPT_TOGETHER}
    for item in items:
        for name in set(getattr(item, "fixturenames", ())) & set(KEPT_TOGETHER):
            sharing[name].add(module[item])
    placed = assign(Counter(module.values()), _durations(), n, sharing.values())
    mine = [item for item in items if placed[module[item]] == k - 1]
    others = [item for item in items if placed[module[item]] != k - 1]
    if others:
        config.hook.pytest_deselected(items=others)
        items[:] = mine

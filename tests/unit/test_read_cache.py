"""The read model cache without a database (`read.cache`): each entry is read once per cluster
version, a new version drops the older entries, concurrent misses read once, a failed read keeps
nothing, and the cache never holds more than its bound."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.expose.read import cache as read_cache
from monitor.expose.read.cache import ClusterReads, ReadCache
from monitor.store.versions import Version

T = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CONN: Any = object()


class Versions:
    """What `cluster_version` answers, per cluster, as the test moves it on."""

    def __init__(self) -> None:
        self.now: dict[str, Version] = {"prod": (T, T, None)}

    def __call__(self, conn: Any, cluster: str) -> Version | None:
        assert conn is CONN
        return self.now.get(cluster)

    def evaluate(self, cluster: str = "prod") -> None:
        evaluated_at, collected_at, findings_at = self.now[cluster]
        self.now[cluster] = ((evaluated_at or T) + timedelta(minutes=1), collected_at, findings_at)


@pytest.fixture
def versions(monkeypatch: pytest.MonkeyPatch) -> Versions:
    fake = Versions()
    monkeypatch.setattr(read_cache, "cluster_version", fake)
    return fake


def _prod(cache: ReadCache) -> ClusterReads:
    reads = cache.of(CONN, "prod")
    assert reads is not None
    return reads


class Reader:
    def __init__(self, delay: float = 0.0) -> None:
        self.calls = 0
        self.delay = delay

    def __call__(self, conn: Any) -> list[int]:
        self.calls += 1
        time.sleep(self.delay)
        return [self.calls]


def test_an_entry_is_read_once_per_version(versions: Versions) -> None:
    cache, read = ReadCache(), Reader()
    prod = cache.of(CONN, "prod")
    assert prod is not None and prod.evaluated_at == T
    assert prod.get(("groups", 1), read) == [1]
    assert _prod(cache).get(("groups", 1), read) == [1]
    assert read.calls == 1 and (cache.hits, cache.misses) == (1, 1)
    assert _prod(cache).get(("groups", 2), read) == [2], "other parameters, another entry"
    versions.evaluate()
    assert _prod(cache).get(("groups", 1), read) == [3], "read again after an evaluation"
    assert len(cache) == 1, "the older version's entries are dropped"
    assert cache.of(CONN, "staging") is None, "a cluster never collected"


def test_each_part_of_the_version_counts(versions: Versions) -> None:
    cache, read = ReadCache(), Reader()
    _prod(cache).get("cluster page", read)
    for change in ((T, T + timedelta(seconds=15), None), (T, T + timedelta(seconds=15), T)):
        versions.now["prod"] = change  # a collection, then a change of a finding
        before = read.calls
        _prod(cache).get("cluster page", read)
        assert read.calls == before + 1


def test_a_request_that_saw_an_older_version_reads_without_keeping(versions: Versions) -> None:
    cache, read = ReadCache(), Reader()
    old = cache.of(CONN, "prod")
    versions.evaluate()
    new = cache.of(CONN, "prod")
    assert old is not None and new is not None
    assert old.get("x", read) == [1] and old.get("x", read) == [2], "an older version is not kept"
    assert new.get("x", read) == [3] and new.get("x", read) == [3]


def test_concurrent_misses_read_once(versions: Versions) -> None:
    cache, read = ReadCache(), Reader(delay=0.2)
    results: list[list[int]] = []

    def ask() -> None:
        results.append(_prod(cache).get("cluster page", read))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert read.calls == 1 and results == [[1]] * 8


def test_a_failed_read_keeps_nothing(versions: Versions) -> None:
    cache = ReadCache()

    def away(conn: Any) -> list[int]:
        raise ConnectionError("PostgreSQL went away")

    with pytest.raises(ConnectionError):
        _prod(cache).get("cluster page", away)
    assert len(cache) == 0
    assert _prod(cache).get("cluster page", Reader()) == [1]


def test_the_cache_is_bounded(versions: Versions) -> None:
    cache, read = ReadCache(maxsize=3), Reader()
    prod = cache.of(CONN, "prod")
    assert prod is not None
    for page in range(10):
        prod.get(("topics", page), read)
    assert len(cache) == 3
    assert prod.get(("topics", 9), read) == [10], "the newest are kept"
    with pytest.raises(ValueError, match="at least 1 entry"):
        ReadCache(maxsize=0)

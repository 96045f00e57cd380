"""Read models kept in memory until their cluster changes: the pages and the JSON API read the
newest evaluation, which changes once a minute, but are asked for it many times a second.

Each request first asks for its cluster's version (`monitor.store.versions.cluster_version`: the
newest evaluation, the newest metadata collection and the newest change of a finding, one cheap
query, which also says whether the cluster exists). A read model is then looked up by (cluster,
version, what it is), `what` naming the read and its parameters (a list's search, sort and
page); only a miss runs the read, and a new version drops every older entry of the cluster. The same
entry serves the HTML page and the JSON API when they read the same thing.

What is kept: the read layer's records computed from the derived tables, the findings and the
collected metadata (counts, worst rows, lists, a topic's partitions and consumers, worst
statuses, the findings that colour a page's rows), never rendered HTML nor anything per user.
What is not kept, because it changes between evaluations and must show at once: alerts
(acknowledgements, silences), retention requests, repairs, audit, probe rounds, lag history over
a window that moves with the clock, and the offset lag of the groups a list shows, the lagging
groups of the topics a list shows, the lists that pick by them (the `lagging` filter, the sort by
lagging groups) and a list of groups before the first evaluation (the commits land between
evaluations); the routes read those live: the offset lag of a page's groups is bounded by the
rows a page shows, a topic's count of lagging groups is a range of an index. A cluster's count of
groups and lagging groups is one pass over the cluster's latest offsets (docs/bench/fresh-lag.md),
so it is kept for a moment (`counts`: at least a second, longer where a count costs more). The
topic page reads the topic's settings and configuration live too; a list's retention columns
follow a configuration change at the next metadata collection.

Bounded: an LRU of at most `maxsize` entries, each at most one page of a list (`queries.MAX_LIMIT`
rows) or one topic's partitions. Thread-safe; concurrent misses of one entry run the read once,
the others wait for it. A read that fails (PostgreSQL away) stores nothing: the error reaches the
route, which answers as without the cache (a 503 for a database that does not answer).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar, cast

from cachetools import LRUCache
from sqlalchemy import Connection

from monitor.expose.read import lag as read_lag
from monitor.expose.read import topics as read_topics
from monitor.expose.read.fresh import KeptCounts
from monitor.expose.read.queries import FIRST_PAGE, Listing, Page
from monitor.store.versions import Version, cluster_version

T = TypeVar("T")

DEFAULT_ENTRIES = 512
"""Read models kept at most: a cluster page's worth is a dozen; lists add one per page asked."""

_Key = tuple[str, Version, Hashable]
_NEVER = datetime.min.replace(tzinfo=UTC)


def _order(version: Version) -> tuple[datetime, datetime, datetime]:
    evaluated_at, collected_at, findings_at = version
    return (evaluated_at or _NEVER, collected_at, findings_at or _NEVER)


class ReadCache:
    """The read models of every cluster, by version (see the module's docstring)."""

    def __init__(self, maxsize: int = DEFAULT_ENTRIES) -> None:
        if maxsize < 1:
            raise ValueError(f"the read model cache needs room for at least 1 entry, not {maxsize}")
        self._entries: LRUCache[_Key, Any] = LRUCache(maxsize)
        self._lock = threading.Lock()
        self._building: dict[_Key, threading.Lock] = {}
        self._newest: dict[str, Version] = {}
        self.counts = KeptCounts()
        """Each cluster's groups and lagging groups, counted at most about once a second
        (`fresh.KeptCounts`): what the overview and the cluster pages and resources show."""
        self.hits = 0
        self.misses = 0

    def of(self, conn: Connection, cluster: str) -> ClusterReads | None:
        """The read models of `cluster` as of now, read through `conn`; None when the monitor has
        never collected a cluster of that name."""
        version = cluster_version(conn, cluster)
        if version is None:
            return None
        with self._lock:
            newest = self._newest.get(cluster)
            if newest is None or _order(version) > _order(newest):
                self._newest[cluster] = version
                for key in [k for k in self._entries if k[0] == cluster and k[1] != version]:
                    del self._entries[key]
        return ClusterReads(self, conn, cluster, version)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._newest.clear()
        self.counts = KeptCounts()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: _Key, build: Callable[[], T]) -> T:
        """The entry `key`, built with `build` on a miss (`ClusterReads.get` makes the keys)."""
        found, value = self._lookup(key)
        if found:
            return cast(T, value)
        with self._lock:
            building = self._building.setdefault(key, threading.Lock())
        with building:  # one read per entry at a time: the others wait for it, then find it
            found, value = self._lookup(key)
            if found:
                return cast(T, value)
            try:
                value = build()
                with self._lock:
                    self.misses += 1
                    if self._newest.get(key[0]) == key[1]:  # an older version is read, not kept
                        self._entries[key] = value
            finally:
                with self._lock:
                    self._building.pop(key, None)
            return value

    def _lookup(self, key: _Key) -> tuple[bool, Any]:
        with self._lock:
            try:
                value = self._entries[key]
            except KeyError:
                return False, None
            self.hits += 1
            return True, value


class ClusterReads:
    """One cluster's read models at one version, for the duration of one request."""

    def __init__(self, cache: ReadCache, conn: Connection, cluster: str, version: Version) -> None:
        self._cache = cache
        self.conn = conn
        """The request's connection, for what is read live."""
        self.cluster = cluster
        self.version = version

    @property
    def evaluated_at(self) -> datetime | None:
        """The evaluation the read models come from (None before the first)."""
        return self.version[0]

    def get(self, what: Hashable, read: Callable[[Connection], T]) -> T:
        """The read model `what` (a name and the read's parameters), read with `read` on a miss.
        Whatever `read` returns is shared by the requests that follow: never change it."""
        return self._cache.get((self.cluster, self.version, what), lambda: read(self.conn))

    def topics(
        self,
        *,
        search: str | None = None,
        problems: bool = False,
        sort: read_topics.TopicSort = "topic",
        page: Page = FIRST_PAGE,
    ) -> Listing[read_topics.TopicSummary]:
        """`read_topics.topics` of the cluster, kept; the lagging groups of the topics on the page
        counted live (`read_topics.freshened_topics`), and the page read live when sorted by them."""
        if sort == "lagging_groups":
            return read_topics.topics(
                self.conn, self.cluster, search=search, problems=problems, sort=sort, page=page
            )
        listing = self.get(
            ("topics", search, problems, sort, page),
            lambda conn: read_topics.topics(
                conn, self.cluster, search=search, problems=problems, sort=sort, page=page
            ),
        )
        return read_topics.freshened_topics(self.conn, self.cluster, listing)

    def groups(
        self,
        *,
        search: str | None = None,
        status: Sequence[str] = (),
        lagging: bool = False,
        sort: read_lag.GroupSort = "status",
        page: Page = FIRST_PAGE,
    ) -> Listing[read_lag.GroupSummary]:
        """`read_lag.groups` of the cluster, kept; the offset lag of the groups on the page read
        live (`read_lag.freshened_groups`). Read live altogether when the groups picked follow the
        offsets the store holds: the `lagging` filter, and the list before the first evaluation."""
        statuses = tuple(status)

        def read(conn: Connection) -> Listing[read_lag.GroupSummary]:
            return read_lag.groups(
                conn, self.cluster, search=search, status=statuses, lagging=lagging, sort=sort, page=page
            )

        live = lagging or self.evaluated_at is None
        listing = (
            read(self.conn) if live else self.get(("groups", search, statuses, lagging, sort, page), read)
        )
        return read_lag.freshened_groups(self.conn, self.cluster, listing)

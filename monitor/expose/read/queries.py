"""The read layer's shared conventions, and the overview's queries.

The read layer is a set of typed, read-only functions over the SQL views of migration 0005 (the
read model): `clusters` (clusters, brokers, findings), `topics` (topics, partitions, the
groups reading a topic), `lag` (consumer groups, their members, lag per topic and partition) and
`history` (lag over time, recent commits). The web pages, the CLI reports and the JSON API all
call them, so each:

- takes a `Connection` and never writes or commits (the caller owns the transaction);
- returns frozen dataclasses (`Described`, so the API documents every field);
- returns None for an unknown cluster, topic or group, so each caller answers in its own way;
- pages long lists with `Page` (a cluster may have 100k partitions and 10k groups): a `Listing`
  carries one page, the total that matched, and `evaluated_at`, the evaluation the numbers come
  from (how fresh the answer is).

Sorting and filtering happen in SQL, from whitelisted fragments only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, text

from monitor.core.vocabulary import REACHED_RUN_STATUSES
from monitor.expose.read.fields import Described

T = TypeVar("T")

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
"""The largest page the API serves; the CLI may ask for everything (`Page(limit=None)`)."""


@dataclass(frozen=True, slots=True)
class Page:
    """Which slice of a long list to return; `limit=None` returns everything from `offset` on."""

    limit: int | None = DEFAULT_LIMIT
    offset: int = 0

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be at least 1, not {self.limit}")
        if self.offset < 0:
            raise ValueError(f"offset must not be negative, not {self.offset}")


ALL = Page(limit=None)
FIRST_PAGE = Page()


@dataclass(frozen=True, slots=True)
class Listing(Described, Generic[T]):
    """One page of a list, with how many entries matched in all and how fresh they are."""

    items: list[T]
    total: int
    limit: int | None
    offset: int
    evaluated_at: datetime | None
    next_offset: int | None = None


def next_offset(page: Page, returned: int, total: int) -> int | None:
    """Where the page after `page` starts, or None when `page` (with `returned` entries) is the last."""
    following = page.offset + returned
    return following if page.limit is not None and returned and following < total else None


def fetch_page(
    conn: Connection,
    record: type[T],
    body: str,
    params: Mapping[str, Any],
    order_by: str,
    page: Page,
    evaluated_at: datetime | None,
) -> Listing[T]:
    """Run `body` (a SELECT whose columns are `record`'s fields) for one page in `order_by` order.

    The total comes from a window count in the same query; only a page past the end (no rows)
    costs a second query to count."""
    limit = "" if page.limit is None else f"LIMIT {int(page.limit)}"
    sql = (
        f"SELECT q.*, count(*) OVER () AS total__ FROM ({body}) q "
        f"ORDER BY {order_by} {limit} OFFSET {int(page.offset)}"
    )
    result = conn.execute(text(sql), dict(params))
    names = tuple(result.keys())[:-1]  # (the columns of `body`, then total__)
    rows = result.all()  # one fetch, rows unpacked by position: a page of 1,000 partitions is common
    if rows:
        total = int(rows[0][-1])
    elif page.offset:
        total = int(conn.execute(text(f"SELECT count(*) FROM ({body}) q"), dict(params)).scalar_one())
    else:
        total = 0
    items = [record(**dict(zip(names, row[:-1], strict=True))) for row in rows]
    return Listing(items, total, page.limit, page.offset, evaluated_at, next_offset(page, len(items), total))


def records(conn: Connection, record: type[T], sql: str, params: Mapping[str, Any]) -> list[T]:
    """Every row of `sql` as a `record` (the columns are its fields)."""
    result = conn.execute(text(sql), dict(params))
    names = tuple(result.keys())
    return [record(**dict(zip(names, row, strict=True))) for row in result.all()]


def like_pattern(fragment: str) -> str:
    """A LIKE pattern matching `fragment` anywhere, with LIKE's wildcards taken literally."""
    escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def cluster_exists(conn: Connection, cluster: str) -> bool:
    found = conn.execute(text("SELECT 1 FROM clusters WHERE name = :c"), {"c": cluster}).first()
    return found is not None


def latest_evaluation(conn: Connection, cluster: str) -> datetime | None:
    """When the newest evaluation of `cluster` ran (None before the first)."""
    value = conn.execute(
        text("SELECT evaluated_at FROM latest_evaluations WHERE cluster = :c"), {"c": cluster}
    ).scalar()
    return value if isinstance(value, datetime) else None


# ---------------------------------------------------------------------------------------------
# The newest collection runs, straight from `collection_runs` (no evaluation needed).


_LAST_RUNS = text(
    """
    SELECT DISTINCT ON (cluster, job) cluster, job, instance, started_at, finished_at, duration_ms,
           status, counts, error
    FROM collection_runs ORDER BY cluster, job, started_at DESC
    """
)


def last_runs(conn: Connection) -> list[dict[str, Any]]:
    """The newest run of every cluster and job."""
    return [dict(row._mapping) for row in conn.execute(_LAST_RUNS)]


def newest_successful_run(conn: Connection) -> datetime | None:
    value = conn.execute(
        text("SELECT max(finished_at) FROM collection_runs WHERE status = ANY(:reached)"),
        {"reached": list(REACHED_RUN_STATUSES)},
    ).scalar()
    return value if isinstance(value, datetime) else None

"""Named leases shared by daemon instances (which instance collects which cluster).

A lease is held until `expires_at`; its holder renews it well before then. Taking, renewing and
expiring all follow the database clock, in one statement, so two instances with skewed clocks
still agree on who holds what. Functions take a connection inside the caller's transaction and
never commit: the lease changes hands when the caller commits.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, text
from sqlalchemy.orm import Mapped, mapped_column

from monitor.store.base import Base


class Lease(Base):
    """A named lease shared by daemon instances; a holder that stops renewing loses it at expires_at."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(primary_key=True)
    holder: Mapped[str]
    acquired_at: Mapped[datetime]
    renewed_at: Mapped[datetime]
    expires_at: Mapped[datetime]


_ACQUIRE = text(
    """
INSERT INTO leases AS l (name, holder, acquired_at, renewed_at, expires_at)
VALUES (:name, :holder, statement_timestamp(), statement_timestamp(),
        statement_timestamp() + make_interval(secs => :ttl))
ON CONFLICT (name) DO UPDATE SET
    holder = excluded.holder,
    acquired_at = CASE
        WHEN l.holder = excluded.holder AND l.expires_at >= excluded.renewed_at THEN l.acquired_at
        ELSE excluded.acquired_at
    END,
    renewed_at = excluded.renewed_at,
    expires_at = excluded.expires_at
WHERE l.expires_at < excluded.renewed_at OR l.holder = excluded.holder
RETURNING holder
"""
)


def acquire(conn: Connection, name: str, holder: str, ttl_seconds: float) -> bool:
    """Take lease `name` for `holder` if it is free, expired or already theirs, until now +
    `ttl_seconds` (database time); True if `holder` holds it now.

    Renewing keeps `acquired_at`; taking a lease over (or back after it expired) resets it. Two
    instances racing for a free lease cannot both win: the loser's insert turns into an update
    that the WHERE clause refuses.
    """
    if ttl_seconds <= 0:
        raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
    taken = conn.execute(_ACQUIRE, {"name": name, "holder": holder, "ttl": float(ttl_seconds)})
    return taken.scalar_one_or_none() == holder


def release(conn: Connection, name: str, holder: str) -> None:
    """Give lease `name` up if `holder` holds it (a no-op otherwise), so another instance can take
    it at once instead of waiting for it to expire."""
    conn.execute(
        text("DELETE FROM leases WHERE name = :name AND holder = :holder"), {"name": name, "holder": holder}
    )


def holders(conn: Connection) -> dict[str, tuple[str, datetime]]:
    """name -> (holder, expires_at) of every lease that has not expired (database time)."""
    rows = conn.execute(
        text(
            "SELECT name, holder, expires_at FROM leases "
            "WHERE expires_at >= statement_timestamp() ORDER BY name"
        )
    )
    return {name: (holder, expires_at) for name, holder, expires_at in rows}

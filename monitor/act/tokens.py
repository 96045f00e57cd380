"""API tokens for scripts that use the retention API: created on the command line, stored hashed.

A token is 32 random bytes (URL-safe text with a `khr_` prefix so a leaked one is recognisable in a
secret scanner); only its SHA-256 is stored, so the table leaks nothing usable. A slow password
hash would add nothing for 256 random bits. The token is shown once, at creation, and never logged.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, insert, select, update

from monitor.act.model import RetentionError
from monitor.store.retention import ApiToken

PREFIX = "khr_"


@dataclass(frozen=True, slots=True)
class TokenOwner:
    name: str
    user: str
    teams: frozenset[str]


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_token(
    conn: Connection,
    *,
    name: str,
    user: str,
    teams: Sequence[str],
    created_by: str,
    now: datetime,
    expires_at: datetime | None = None,
) -> str:
    """Store a new token for `user` in `teams`; returns the token (the only time it is seen)."""
    if not name.strip() or not user.strip():
        raise RetentionError("invalid", "a token needs a name (what uses it) and a user (who it acts as)")
    token = PREFIX + secrets.token_urlsafe(32)
    conn.execute(
        insert(ApiToken).values(
            name=name,
            user_name=user,
            teams=sorted(set(teams)),
            token_hash=hash_token(token),
            created_by=created_by,
            created_at=now,
            expires_at=expires_at,
        )
    )
    return token


def find_token(conn: Connection, token: str, now: datetime) -> TokenOwner | None:
    """Who a presented token acts as; None when it is unknown, revoked or expired."""
    row = conn.execute(
        select(
            ApiToken.name, ApiToken.user_name, ApiToken.teams, ApiToken.expires_at, ApiToken.revoked_at
        ).where(ApiToken.token_hash == hash_token(token))
    ).first()
    if row is None or row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= now):
        return None
    return TokenOwner(row.name, row.user_name, frozenset(row.teams))


def revoke_token(conn: Connection, name: str, now: datetime) -> int:
    """Revoke every live token called `name`; returns how many."""
    return conn.execute(
        update(ApiToken).where(ApiToken.name == name, ApiToken.revoked_at.is_(None)).values(revoked_at=now)
    ).rowcount


def list_tokens(conn: Connection) -> list[dict[str, object]]:
    rows = conn.execute(
        select(
            ApiToken.id,
            ApiToken.name,
            ApiToken.user_name,
            ApiToken.teams,
            ApiToken.created_by,
            ApiToken.created_at,
            ApiToken.expires_at,
            ApiToken.revoked_at,
        ).order_by(ApiToken.id)
    )
    return [dict(r._mapping) for r in rows]

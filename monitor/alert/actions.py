"""What people do to alerts: acknowledge an incident, create and expire silences, and list them.

Shared by the CLI, the HTTP API, the web forms and the acknowledgement link in notifications, so
each action has one authorization rule (`monitor.alert.permissions`) and one audit entry
(`monitor.store.audit`, written in the action's transaction). The caller identifies the person
(`Identity`): nothing here takes a name from a request body. Functions take a connection inside the
caller's transaction and never commit. A refusal raises `ActionError` whose `code` the API maps to
its status and whose message says what is wrong and how to fix it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, Engine, text

from monitor.alert import permissions
from monitor.alert.matchers import Matcher, MatcherError, parse_matchers
from monitor.core.errors import MonitorError
from monitor.core.identity import Identity
from monitor.core.settings import MAX_SILENCES_PER_TEAM
from monitor.core.vocabulary import most_severe_first_sql
from monitor.store import audit

ActionCode = Literal["invalid", "forbidden", "not_found", "conflict", "expired"]
MAX_COMMENT = 2_000


class ActionError(MonitorError):
    """A request about alerts that cannot be carried out as asked. `code` is stable (the HTTP API
    answers with it: invalid 422, forbidden 403, not_found 404, conflict 409, expired 410)."""

    def __init__(self, message: str, code: ActionCode = "invalid") -> None:
        super().__init__(message)
        self.code: ActionCode = code


def actor(who: Identity) -> audit.Actor:
    return audit.Actor(who.user, who.source, who.address or None)


def acknowledge(
    conn: Connection,
    who: Identity,
    *,
    now: datetime,
    group_id: int | None = None,
    token: str | None = None,
    fingerprint: str | None = None,
    comment: str = "",
    link_ttl: timedelta = timedelta(days=7),
    platform_teams: Collection[str] = (),
) -> list[int]:
    """Acknowledge the open incident(s) named by id, link token or alert fingerprint.

    Returns the acknowledged group ids. An acknowledged incident gets no repeats and is not
    escalated; the next alert cycle passes the acknowledgement on to its receivers once.

    Who may: see `permissions.acknowledge_refusal` (the team of the incident's alerts, or the
    platform role); every incident named must be theirs, or none is acknowledged.

    A link token names exactly one incident, works once (an acknowledged incident refuses it) and
    expires `link_ttl` after the incident's latest notification.
    """
    if len(comment) > MAX_COMMENT:
        raise ActionError(f"the comment is {len(comment)} characters; at most {MAX_COMMENT}")
    params: dict[str, Any]
    if group_id is not None:
        where, params = "id = :v", {"v": group_id}
    elif token is not None:
        where, params = "ack_token = :v", {"v": token}
    elif fingerprint is not None:
        where, params = "notified ? :v", {"v": fingerprint}
    else:
        raise ActionError("name the incident: a group id, an acknowledgement token or an alert fingerprint")
    rows = conn.execute(
        text(
            "SELECT id, acknowledged_at, acknowledged_by, created_at, last_notified_at FROM alert_groups"
            f" WHERE closed_at IS NULL AND {where} FOR UPDATE"
        ),
        params,
    ).all()
    if not rows:
        raise ActionError(
            "no open incident matches; it may have resolved already (see `kafka-health alerts list`)",
            "not_found",
        )
    if token is not None:
        _check_link(rows[0], now, link_ttl)
    for row in rows:
        _allowed(permissions.acknowledge_refusal(who, row.id, _teams_of(conn, row.id), platform_teams))
    via = "link" if token is not None else _via(who)
    ids = []
    for row in rows:
        conn.execute(
            text(
                "INSERT INTO acks (alert_group_id, acknowledged_by, comment, via, created_at)"
                " VALUES (:g, :by, :comment, :via, :now)"
            ),
            {"g": row.id, "by": who.user, "comment": comment, "via": via, "now": now},
        )
        if row.acknowledged_at is None:
            conn.execute(
                text("UPDATE alert_groups SET acknowledged_at = :now, acknowledged_by = :by WHERE id = :g"),
                {"g": row.id, "by": who.user, "now": now},
            )
        audit.write(
            conn, at=now, subject="incident", subject_id=int(row.id), actor=actor(who), action="acknowledged",
            reason=comment or None, detail=f"via {via}",
        )  # fmt: skip
        ids.append(int(row.id))
    return ids


def _teams_of(conn: Connection, group_id: int) -> set[str | None]:
    """The teams of an incident's alerts (None for an alert without one): those it notified, else
    the team it is grouped by."""
    rows = conn.execute(
        text(
            "SELECT DISTINCT a.labels->>'team' FROM alert_groups g"
            " JOIN alerts a ON g.notified ? a.fingerprint WHERE g.id = :g"
            " UNION SELECT group_labels->>'team' FROM alert_groups"
            " WHERE id = :g AND (group_labels ? 'team' OR notified = '{}'::jsonb)"
        ),
        {"g": group_id},
    ).scalars()
    return set(rows)


def _allowed(refusal: str | None) -> None:
    if refusal is not None:
        raise ActionError(refusal, "forbidden")


def _check_link(row: Any, now: datetime, ttl: timedelta) -> None:
    if row.acknowledged_at is not None:
        raise ActionError(
            f"incident {row.id} was already acknowledged by {row.acknowledged_by}; an acknowledgement "
            "link works once (see the alerts page for the incident's state)",
            "conflict",
        )
    sent = row.last_notified_at or row.created_at
    if now - sent > ttl:
        raise ActionError(
            f"this acknowledgement link expired {ttl} after the incident's last notification; "
            "acknowledge incident {0} on the alerts page instead".format(row.id),
            "expired",
        )


def _via(who: Identity) -> str:
    return {"proxy": "web", "development": "web", "token": "api", "cli": "cli"}[who.source]


def create_silence(
    conn: Connection,
    who: Identity,
    *,
    matchers: list[str],
    comment: str,
    now: datetime,
    duration: timedelta,
    max_duration: timedelta,
    platform_teams: Collection[str],
    starts_at: datetime | None = None,
    max_per_team: int = MAX_SILENCES_PER_TEAM,
) -> int:
    """Store a silence over `matchers` (at least one) from `starts_at` (default now) for `duration`.

    Who may: see `permissions.check_silence` (their own teams' alerts, or the platform role). A
    team has at most `max_per_team` active or scheduled silences (`alert.max_silences_per_team`)."""
    if not matchers:
        raise ActionError("a silence needs at least one matcher, e.g. cluster=prod rule=ConsumerLag")
    if len(matchers) > permissions.MAX_MATCHERS:
        raise ActionError(f"a silence takes at most {permissions.MAX_MATCHERS} matchers, not {len(matchers)}")
    try:
        parsed = parse_matchers(matchers)
    except MatcherError as exc:
        raise ActionError(str(exc)) from None
    if not comment.strip():
        raise ActionError("say why (--comment TEXT): the next on-call engineer reads it")
    if len(comment) > MAX_COMMENT:
        raise ActionError(f"the comment is {len(comment)} characters; at most {MAX_COMMENT}")
    if starts_at is not None and starts_at.tzinfo is None:
        raise ActionError("give the start with its UTC offset, e.g. 2026-11-21T22:00:00+00:00")
    if duration <= timedelta(0):
        raise ActionError("the silence's duration must be positive, e.g. 2h")
    if duration > max_duration:
        raise ActionError(
            f"a silence may last at most {max_duration}; ask for less, or raise settings.silence_max_duration"
        )
    start = starts_at or now
    if start - now > max_duration:
        raise ActionError(f"a silence may start at most {max_duration} from now; give an earlier start")
    if now - start > max_duration:
        raise ActionError(f"a silence may start at most {max_duration} ago; give a later start")
    _allowed(permissions.silence_refusal(who, parsed, platform_teams))
    _within_team_cap(conn, parsed, now, max_per_team)
    texts = [str(m) for m in parsed]
    silence_id = int(
        conn.execute(
            text(
                "INSERT INTO silences (matchers, starts_at, ends_at, created_by, comment, created_at)"
                " VALUES (CAST(:m AS jsonb), :s, :e, :by, :c, :now) RETURNING id"
            ),
            {
                "m": json.dumps(texts),
                "s": start,
                "e": start + duration,
                "by": who.user,
                "c": comment,
                "now": now,
            },
        ).scalar_one()
    )
    audit.write(
        conn, at=now, subject="silence", subject_id=silence_id, actor=actor(who), action="silence_created",
        new_value={"matchers": texts, "starts_at": start.isoformat(), "ends_at": (start + duration).isoformat()},  # noqa: E501
        reason=comment,
    )  # fmt: skip
    return silence_id


_SILENCE_CAP_LOCK = 0x6B68_7363  # pg_advisory_xact_lock(key, hashtext(team)) of the team cap ("khsc")
_NAMES_NO_TEAM = "NOT jsonb_path_exists(matchers, '$[*] ? (@ like_regex \"^team=[^~]\")')"
"""A silence that names no team: none of its matchers, stored as `str(Matcher)`, is `team=<team>`
(a bare value never starts with `~`: it would be quoted)."""


def _within_team_cap(conn: Connection, matchers: tuple[Matcher, ...], now: datetime, cap: int) -> None:
    """Refuse (409) a silence beyond the cap of a team it names, or of the silences that name no
    team. Each team's count is taken under a lock of its own, so two requests at once cannot both
    take the last place."""
    for team in sorted(permissions.named_teams(matchers)) or [""]:
        conn.execute(
            text("SELECT pg_advisory_xact_lock(CAST(:k AS integer), hashtext(:t))"),
            {"k": _SILENCE_CAP_LOCK, "t": team},
        )
        which = "matchers ? :m" if team else _NAMES_NO_TEAM
        count = conn.execute(
            text(f"SELECT count(*) FROM silences WHERE expired_at IS NULL AND ends_at > :now AND {which}"),
            {"now": now, "m": str(Matcher(permissions.TEAM_LABEL, "=", team)) if team else ""},
        ).scalar_one()
        if count >= cap:
            whose = f"team {team} has" if team else "the silences that name no team have"
            raise ActionError(
                f"{whose} {count} active or scheduled silences, the most allowed "
                f"(alert.max_silences_per_team = {cap}): expire one that is no longer needed "
                "(`kafka-health alerts silences`, then `kafka-health alerts expire ID`), or widen one "
                "to cover more alerts",
                "conflict",
            )


def expire_silence(
    conn: Connection, who: Identity, silence_id: int, now: datetime, platform_teams: Collection[str]
) -> None:
    """End a silence now: its creator, a member of the team it names, or the platform role."""
    row = conn.execute(
        text(
            "SELECT id, matchers, created_by, ends_at FROM silences"
            " WHERE id = :id AND expired_at IS NULL AND ends_at > :now FOR UPDATE"
        ),
        {"id": silence_id, "now": now},
    ).first()
    if row is None:
        raise ActionError(f"no active silence {silence_id} (see `kafka-health alerts silences`)", "not_found")
    try:
        matchers = parse_matchers(row.matchers)
    except MatcherError:  # stored before a rule it breaks: it mutes nothing; let it be ended
        matchers = ()
    _allowed(permissions.expire_refusal(who, str(row.created_by), matchers, platform_teams))
    conn.execute(text("UPDATE silences SET expired_at = :now WHERE id = :id"), {"id": silence_id, "now": now})
    audit.write(
        conn, at=now, subject="silence", subject_id=silence_id, actor=actor(who), action="silence_expired",
        old_value={"matchers": list(row.matchers), "ends_at": row.ends_at.isoformat()},
    )  # fmt: skip


@contextmanager
def audited(
    engine: Engine,
    who: Identity,
    subject: str,
    subject_id: int | None,
    what: str,
    now: Callable[[], datetime],
) -> Iterator[Connection]:
    """A transaction for one action of `who`. A refusal (`ActionError`) rolls it back, is audited
    in a transaction of its own, and is raised again for the caller to answer."""

    def record(conn: Connection, exc: ActionError) -> None:
        audit.write(
            conn, at=now(), subject=subject, subject_id=subject_id, actor=actor(who), action="refused",
            detail=f"{what}: {exc.code}: {exc}",
        )  # fmt: skip

    with audit.refusals_recorded(engine, ActionError, record) as conn:
        yield conn


def _slice(limit: int | None, offset: int) -> str:
    """A LIMIT/OFFSET clause for a list read in pages (`limit` None: to the end)."""
    return (f" LIMIT {int(limit)}" if limit is not None else "") + (
        f" OFFSET {int(offset)}" if offset else ""
    )


def silences(
    conn: Connection, now: datetime, include_ended: bool = False, *, limit: int | None = None, offset: int = 0
) -> list[dict[str, Any]]:
    """Silences, newest first: active and future ones, or all with `include_ended`; `limit`
    and `offset` read one page."""
    rows = conn.execute(
        text(
            "SELECT id, matchers, starts_at, ends_at, created_by, comment, created_at, expired_at,"
            " (expired_at IS NULL AND starts_at <= :now AND ends_at > :now) AS active FROM silences"
            " WHERE CAST(:all AS boolean) OR (expired_at IS NULL AND ends_at > :now) ORDER BY id DESC"
            + _slice(limit, offset)
        ),
        {"now": now, "all": include_ended},
    )
    return [dict(r._mapping) for r in rows]


def open_alerts(conn: Connection, *, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Open alerts, most severe first, then oldest first; `limit` and `offset` read one page."""
    rows = conn.execute(
        text(
            "SELECT a.id, a.fingerprint, a.rule, a.cluster, a.entity_key, a.severity, a.state, a.summary,"
            " a.starts_at, a.silenced_by, a.inhibited_by, a.labels, a.annotations"
            " FROM alerts a WHERE a.state <> 'resolved'"
            f" ORDER BY {most_severe_first_sql('a.severity')}, a.pending_since, a.id" + _slice(limit, offset)
        )
    )
    return [dict(r._mapping) for r in rows]


def open_incidents(conn: Connection, *, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Open incidents, oldest first; `limit` and `offset` read one page."""
    rows = conn.execute(
        text(
            "SELECT id, receiver, group_labels, severity, created_at, first_notified_at, last_notified_at,"
            " acknowledged_at, acknowledged_by, escalated_to,"
            " (SELECT count(*) FROM jsonb_object_keys(notified)) AS alerts"
            " FROM alert_groups WHERE closed_at IS NULL ORDER BY id" + _slice(limit, offset)
        )
    )
    return [dict(r._mapping) for r in rows]

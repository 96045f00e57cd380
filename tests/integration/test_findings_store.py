"""The findings lifecycle in PostgreSQL: pending -> firing after `for`, severity changes on the same
finding, resolution, idempotent re-runs, and other clusters and rules left alone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from monitor.store.findings import Match, merge_findings

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def match(
    key: str, severity: str = "warning", for_seconds: int = 60, cluster: str = "c1", rule: str = "R"
) -> Match:
    return Match(
        rule,
        "partition",
        key,
        cluster,
        severity,
        1.0,
        f"summary {key}",
        "description",
        for_seconds,
        {"topic": key},
    )


def merge(
    engine: Engine,
    matches: list[Match],
    at: datetime,
    clusters: tuple[str, ...] = ("c1",),
    rules: tuple[str, ...] = ("R",),
) -> dict[str, int]:
    with engine.begin() as conn:
        return merge_findings(conn, matches, at, clusters=clusters, rules=rules)


def findings(engine: Engine) -> dict[str, dict[str, Any]]:
    with engine.connect() as conn:
        return {
            r.entity_key + ("" if r.state != "resolved" else "#resolved"): dict(r._mapping)
            for r in conn.execute(text("SELECT * FROM findings ORDER BY id"))
        }


def test_lifecycle(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM findings"))
    counts = merge(engine, [match("a"), match("b", for_seconds=0)], T)
    assert counts == {"new": 2, "updated": 0, "resolved": 0, "pending": 1, "firing": 1}
    f = findings(engine)
    assert f["a"]["state"] == "pending" and f["b"]["state"] == "firing"

    assert merge(engine, [match("a"), match("b", for_seconds=0)], T)["new"] == 0  # same time: idempotent
    assert findings(engine)["a"]["state"] == "pending"

    merge(engine, [match("a", severity="critical"), match("b", for_seconds=0)], T + timedelta(seconds=61))
    f = findings(engine)
    assert f["a"]["state"] == "firing" and f["a"]["severity"] == "critical" and f["a"]["first_seen"] == T

    counts = merge(engine, [match("b", for_seconds=0)], T + timedelta(seconds=90))
    assert counts["resolved"] == 1
    f = findings(engine)
    assert "a" not in f and f["a#resolved"]["resolved_at"] == T + timedelta(seconds=90)

    merge(engine, [match("a")], T + timedelta(seconds=120))  # fires again later: a new finding
    f = findings(engine)
    assert f["a"]["first_seen"] == T + timedelta(seconds=120) and f["a"]["state"] == "pending"

    merge(engine, [match("a")], T + timedelta(seconds=30))  # an older evaluation moves nothing back
    assert findings(engine)["a"]["last_seen"] == T + timedelta(seconds=120)


def test_other_clusters_and_rules_are_not_resolved(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM findings"))
    merge(
        engine,
        [match("x", cluster="c2"), match("y", rule="Other")],
        T,
        clusters=("c1", "c2"),
        rules=("R", "Other"),
    )
    counts = merge(engine, [], T + timedelta(seconds=10), clusters=("c1",), rules=("R",))
    assert counts["resolved"] == 0
    assert {k for k in findings(engine)} == {"x", "y"}

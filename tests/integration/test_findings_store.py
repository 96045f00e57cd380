"""The findings lifecycle in PostgreSQL: pending -> firing after `for`, severity changes on the same
finding, resolution, idempotent re-runs, and other clusters and rules left alone."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, text

from monitor.core.scheduler import Due
from monitor.store.findings import Match, merge_findings, next_due

T = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def match(
    key: str,
    severity: str = "warning",
    for_seconds: int = 60,
    cluster: str = "c1",
    rule: str = "R",
    observed_at: datetime | None = None,
    held_at: datetime | None = None,
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
        observed_at=observed_at,
        held_at=held_at,
    )


def merge(
    engine: Engine,
    matches: list[Match],
    at: datetime,
    clusters: tuple[str, ...] = ("c1",),
    rules: tuple[str, ...] = ("R",),
    unsampled: tuple[str, ...] = (),
    stale_before: datetime | None = None,
) -> dict[str, int]:
    """`unsampled`: entity keys (of partitions, as `match` makes them) the evaluation did not sample."""
    with engine.begin() as conn:
        return merge_findings(
            conn,
            matches,
            at,
            clusters=clusters,
            rules=rules,
            unsampled=[("partition", key) for key in unsampled],
            stale_before=stale_before,
        )


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
    assert counts == {"new": 2, "updated": 0, "resolved": 0, "gone": 0, "kept": 0, "pending": 1, "firing": 1}
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


def test_an_unsampled_entity_keeps_its_state_until_sampled_or_stale(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM findings"))
    window = timedelta(minutes=15)
    merge(engine, [match("a"), match("b"), match("c", for_seconds=0)], T)

    # A partial run: a and c were not sampled, b was and no longer matches.
    at = T + timedelta(seconds=30)
    counts = merge(engine, [], at, unsampled=("a", "c"), stale_before=at - window)
    assert (counts["resolved"], counts["kept"], counts["pending"], counts["firing"]) == (1, 2, 1, 1)
    f = findings(engine)
    assert (f["a"]["state"], f["a"]["first_seen"], f["a"]["last_seen"]) == ("pending", T, T)
    assert (f["c"]["state"], f["c"]["first_seen"]) == ("firing", T)
    assert f["b#resolved"]["resolved_at"] == at

    # Data again: a still matches and fires on its first `for` timer; c, sampled and not matched, resolves.
    at = T + timedelta(seconds=90)
    counts = merge(engine, [match("a")], at, stale_before=at - window)
    assert (counts["new"], counts["updated"], counts["resolved"], counts["kept"]) == (0, 1, 1, 0)
    f = findings(engine)
    assert (f["a"]["state"], f["a"]["first_seen"]) == ("firing", T)
    assert "c" not in f and f["c#resolved"]["resolved_at"] == at

    # Not sampled for longer than the window: stale, resolved.
    at = T + timedelta(seconds=90) + window
    assert (
        merge(engine, [], at, unsampled=("a",), stale_before=at - window)["resolved"] == 0
    )  # exactly the window
    at += timedelta(seconds=1)
    counts = merge(engine, [], at, unsampled=("a",), stale_before=at - window)
    assert (counts["resolved"], counts["kept"], counts["firing"]) == (1, 0, 0)


def test_for_counts_from_the_sample_that_showed_the_condition(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM findings"))
    sampled = T - timedelta(seconds=40)  # the collection saw it 40 s before the evaluation ran
    merge(engine, [match("a", observed_at=sampled)], T)
    f = findings(engine)
    assert (f["a"]["state"], f["a"]["first_seen"], f["a"]["last_seen"]) == ("pending", sampled, T)

    # 59 s of samples showing it: not yet, however late the evaluation runs
    merge(engine, [match("a", observed_at=sampled + timedelta(seconds=59))], T + timedelta(seconds=30))
    assert findings(engine)["a"]["state"] == "pending"

    # 60 s after the first sample, 20 s after the first evaluation: firing, with the rule's `for`
    # measured from the sample (counted from the evaluation it would still be 40 s away)
    merge(engine, [match("a", observed_at=sampled + timedelta(seconds=60))], T + timedelta(seconds=35))
    f = findings(engine)
    assert (f["a"]["state"], f["a"]["first_seen"]) == ("firing", sampled)

    # an evaluation whose newest sample is older does not move it back
    merge(engine, [match("a", observed_at=sampled)], T + timedelta(seconds=40))
    assert findings(engine)["a"]["state"] == "firing"


def test_for_counts_to_when_the_condition_is_known_to_hold(engine: Engine) -> None:
    """first_seen is the deciding sample; the `for` runs to the newest sample of the entity's jobs
    (held_at), never past the evaluation."""
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM findings"))
    shown = T - timedelta(seconds=70)
    merge(engine, [match("a", observed_at=shown, held_at=shown)], T - timedelta(seconds=65))
    # the deciding job has not run again, another job of the entity 55 s later: not yet
    merge(
        engine,
        [match("a", observed_at=shown, held_at=shown + timedelta(seconds=55))],
        T - timedelta(seconds=10),
    )
    assert findings(engine)["a"]["state"] == "pending"
    # 60 s after the sample that showed it, by another job's sample: firing, first_seen unchanged
    merge(engine, [match("a", observed_at=shown, held_at=shown + timedelta(seconds=61))], T)
    f = findings(engine)
    assert (f["a"]["state"], f["a"]["first_seen"]) == ("firing", shown)
    # held_at past the evaluation counts as the evaluation: not firing early
    merge(engine, [match("b", observed_at=T, held_at=T + timedelta(hours=1), for_seconds=60)], T)
    assert findings(engine)["b"]["state"] == "pending"


def test_a_sample_time_after_the_evaluation_counts_as_the_evaluation_time(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM findings"))
    merge(engine, [match("a", observed_at=T + timedelta(seconds=5)), match("b")], T)
    f = findings(engine)
    assert f["a"]["first_seen"] == T and f["b"]["first_seen"] == T

    counts = merge(
        engine, [match("a", observed_at=T + timedelta(hours=1)), match("b")], T + timedelta(seconds=30)
    )
    assert counts["firing"] == 0, "a sample stamped in the future does not make the `for` elapse"


def test_the_next_due_time_is_the_earliest_pending_first_seen_plus_for(engine: Engine) -> None:
    """Per cluster and entity, with the jobs whose runs the entity's `for` counts to; only the
    pending findings the evaluation matched (one kept as it was, its entity not sampled, would
    ask for an evaluation at every sample)."""
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM findings"))
        assert next_due(conn, ["c1"], T) == [], "nothing pending"
    broker = replace(match("b1"), rule="B", entity="broker", observed_at=T - timedelta(seconds=30))
    merge(
        engine,
        [
            match("slow", for_seconds=600, observed_at=T - timedelta(seconds=10)),
            match("soon", for_seconds=60, observed_at=T - timedelta(seconds=40)),
            match("now", for_seconds=0),  # fires at once: never due
            broker,
        ],
        T,
        rules=("R", "B"),
    )
    merge(engine, [match("other", for_seconds=5, cluster="c2")], T, clusters=("c2",))
    partition = frozenset({"metadata", "offsets", "log_dirs"})
    with engine.connect() as conn:
        assert next_due(conn, ["c1"], T) == [
            Due("c1", T + timedelta(seconds=20), partition),  # the sample 40 s ago plus its 60 s
            Due("c1", T + timedelta(seconds=30), frozenset({"metadata", "log_dirs", "probe"})),
        ]
        assert next_due(conn, ["c2"], T) == [Due("c2", T + timedelta(seconds=5), partition)]
        assert next_due(conn, ["c3"], T) == []

    # once that one fires, the next pending one of its entity is due
    later = T + timedelta(seconds=21)
    with engine.begin() as conn:
        merge_findings(
            conn,
            [
                match("slow", for_seconds=600, observed_at=T),
                match("soon", observed_at=T + timedelta(seconds=20)),
            ],
            later,
            clusters=("c1",),
            rules=("R", "B"),
            unsampled=[("broker", "b1")],
        )
    with engine.connect() as conn:
        assert findings(engine)["soon"]["state"] == "firing"
        assert findings(engine)["b1"]["state"] == "pending", "kept: its broker was not sampled"
        assert next_due(conn, ["c1"], later) == [Due("c1", T + timedelta(seconds=590), partition)]


def test_the_merge_runs_without_jit_and_leaves_the_setting_it_found(engine: Engine) -> None:
    """PostgreSQL compiles a statement it estimates costly: the gone checks of 100,000 findings
    took a second each to compile and a fraction of one to run (store.findings.MERGE_SETTINGS)."""
    seen: list[str] = []
    with engine.begin() as conn:
        conn.execute(text("SET LOCAL jit = on"))
        original = conn.execute

        def execute(statement: Any, *args: Any, **kwargs: Any) -> Any:
            if "last_seen = :t, evaluated_at = :t" in str(statement):
                seen.append(original(text("SHOW jit")).scalar_one())
            return original(statement, *args, **kwargs)

        conn.execute = execute  # type: ignore[method-assign]
        merge_findings(conn, [match("a")], T, clusters=("c1",), rules=("R",))
        del conn.execute
        after = conn.execute(text("SHOW jit")).scalar_one()

    assert seen == ["off"]
    assert after == "on"

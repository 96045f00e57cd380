"""Findings of entities the cluster no longer has resolve with the reason `gone`, in PostgreSQL:
each kind of entity against each mark of the store (a committed offset gone, a topic deleted, a
broker unregistered), with the entities that are still there left alone; a gone entity matches
nothing any more (no finding opened again), and one that comes back is not gone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, text

from monitor.core.vocabulary import RESOLVED_GONE
from monitor.store.findings import Match, merge_findings

T = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
C = "gone-c"

# (entity, labels of the entity's key): the entities of the test's cluster.
ENTITIES: dict[str, tuple[str, dict[str, str]]] = {
    "gp-deleted": ("group_partition", {"group_id": "deleted", "topic": "t", "partition": "0"}),
    "gt-deleted": ("group_topic", {"group_id": "deleted", "topic": "t"}),
    "g-deleted": ("group", {"group_id": "deleted"}),
    "gp-half-0": ("group_partition", {"group_id": "half", "topic": "t", "partition": "0"}),
    "gp-half-1": ("group_partition", {"group_id": "half", "topic": "t", "partition": "1"}),
    "g-half": ("group", {"group_id": "half"}),
    "gt-half-u": ("group_topic", {"group_id": "half", "topic": "u"}),
    "g-alive": ("group", {"group_id": "alive"}),
    "gt-on-deleted-topic": ("group_topic", {"group_id": "alive", "topic": "dropped"}),
    "topic-deleted": ("topic", {"topic": "dropped"}),
    "partition-deleted": ("partition", {"topic": "dropped", "partition": "0"}),
    "topic-alive": ("topic", {"topic": "t"}),
    "broker-unregistered": ("broker", {"broker_id": "3"}),
    "broker-down": ("broker", {"broker_id": "2"}),
    "odd-labels": ("group_partition", {"group_id": "alive", "topic": "t", "partition": "x%/'"}),
    "sg-deleted": ("share_group", {"group_id": "q-deleted"}),
    "sgt-deleted": ("share_group_topic", {"group_id": "q-deleted", "topic": "t"}),
    "sg-alive": ("share_group", {"group_id": "q-alive"}),
    "sgt-alive": ("share_group_topic", {"group_id": "q-alive", "topic": "t"}),
    "sgt-on-deleted-topic": ("share_group_topic", {"group_id": "q-alive", "topic": "dropped"}),
}
GONE = {
    "gp-deleted", "gt-deleted", "g-deleted", "gp-half-1", "gt-on-deleted-topic", "topic-deleted",
    "partition-deleted", "broker-unregistered", "odd-labels", "sg-deleted", "sgt-deleted",
    "sgt-on-deleted-topic",
}  # fmt: skip
"""`half` lost partition 1 of t and all of u (its gt-half-u); `alive` has no offset on partition
"x%/'"; everything else is still there."""
GONE_TOO = {"gt-half-u"}


def _match(key: str) -> Match:
    entity, labels = ENTITIES[key]
    return Match("R", entity, key, C, "warning", 1.0, key, "", 0, {"cluster": C, **labels})


def _merge(engine: Engine, at: datetime, keys: list[str]) -> dict[str, int]:
    with engine.begin() as conn:
        return merge_findings(conn, [_match(k) for k in keys], at, clusters=[C], rules=["R"])


def _state(engine: Engine) -> dict[str, list[tuple[str, str | None]]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text("SELECT entity_key, state, resolved_reason FROM findings WHERE cluster = :c ORDER BY id"),
            {"c": C},
        )
        found: dict[str, list[tuple[str, str | None]]] = {}
        for r in rows:
            found.setdefault(r.entity_key, []).append((r.state, r.resolved_reason))
        return found


def _store(engine: Engine, gone: bool) -> None:
    """The store as the collectors leave it: offsets of `deleted`, `half` and `alive`, topics t,
    u and dropped, brokers 2 and 3; with `gone`, what the collectors mark gone."""
    with engine.begin() as conn:
        for table in ("findings", "latest_group_offsets", "topics", "brokers", "share_group_support"):
            conn.execute(text(f"DELETE FROM {table} WHERE cluster = :c"), {"c": C})
        conn.execute(
            text(
                "INSERT INTO share_group_support (cluster, available, sampled_at, listed)"
                " VALUES (:c, true, :at, :listed)"
            ),
            {"c": C, "at": T, "listed": ["q-alive"] if gone else ["q-deleted", "q-alive"]},
        )
        offsets = [
            ("deleted", "t", 0),
            ("half", "t", 0),
            ("half", "t", 1),
            ("half", "u", 0),
            ("alive", "t", 0),
            ("alive", "dropped", 0),
        ]
        gone_offsets = {("deleted", "t", 0), ("half", "t", 1), ("half", "u", 0)} if gone else set()
        for group, topic, partition in offsets:
            conn.execute(
                text(
                    "INSERT INTO latest_group_offsets (cluster, group_id, topic, partition, sampled_at,"
                    " committed_offset, gone_at) VALUES (:c, :g, :t, :p, :at, 0, :gone)"
                ),
                {"c": C, "g": group, "t": topic, "p": partition, "at": T,
                 "gone": T if (group, topic, partition) in gone_offsets else None},
            )  # fmt: skip
        for topic in ("t", "u", "dropped"):
            conn.execute(
                text(
                    "INSERT INTO topics (cluster, topic, partition_count, replication_factor, internal,"
                    " first_seen, last_seen, deleted_at) VALUES (:c, :t, 2, 3, false, :at, :at, :deleted)"
                ),
                {"c": C, "t": topic, "at": T, "deleted": T if gone and topic == "dropped" else None},
            )
        for broker in (2, 3):
            conn.execute(
                text(
                    "INSERT INTO brokers (cluster, broker_id, host, port, first_seen, last_seen, up,"
                    " unregistered_at) VALUES (:c, :b, 'h', 9092, :at, :at, false, :unregistered)"
                ),
                {"c": C, "b": broker, "at": T, "unregistered": T if gone and broker == 3 else None},
            )


def test_each_entity_resolves_as_gone_only_when_the_cluster_no_longer_has_it(engine: Engine) -> None:
    _store(engine, gone=False)
    keys = sorted(ENTITIES)
    first = _merge(engine, T, keys)
    # An entity the store has no trace of (odd-labels: no such offset) is gone from the start:
    # its match opens nothing.
    assert sorted(_state(engine)) == sorted(set(keys) - {"odd-labels"})
    assert (first["new"], first["gone"]) == (len(keys) - 1, 0)
    _store_gone_keeping_findings(engine)
    counts = _merge(engine, T + timedelta(minutes=1), keys)
    expected = {
        key: [("resolved", RESOLVED_GONE)] if key in GONE | GONE_TOO else [("firing", None)]
        for key in keys
        if key != "odd-labels"
    }
    assert _state(engine) == expected
    assert (counts["new"], counts["gone"], counts["resolved"]) == (0, 12, 12)
    # Matched again later, a gone entity still opens nothing.
    again = _merge(engine, T + timedelta(minutes=2), keys)
    assert (again["new"], again["gone"]) == (0, 0)
    assert _state(engine) == expected


def _store_gone_keeping_findings(engine: Engine) -> None:
    """Mark what went, as the collectors do, leaving the findings."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE latest_group_offsets SET gone_at = :at WHERE cluster = :c AND (group_id, topic, partition)"
                " IN (('deleted', 't', 0), ('half', 't', 1), ('half', 'u', 0))"
            ),
            {"c": C, "at": T},
        )
        conn.execute(
            text("UPDATE topics SET deleted_at = :at WHERE cluster = :c AND topic = 'dropped'"),
            {"c": C, "at": T},
        )
        conn.execute(
            text("UPDATE brokers SET unregistered_at = :at WHERE cluster = :c AND broker_id = 3"),
            {"c": C, "at": T},
        )
        conn.execute(
            text("UPDATE share_group_support SET listed = ARRAY['q-alive'] WHERE cluster = :c"), {"c": C}
        )


def test_an_entity_that_comes_back_is_not_gone(engine: Engine) -> None:
    _store(engine, gone=True)
    assert _merge(engine, T, ["topic-deleted"])["new"] == 0
    with engine.begin() as conn:
        conn.execute(text("UPDATE topics SET deleted_at = NULL WHERE cluster = :c"), {"c": C})
    assert _merge(engine, T + timedelta(minutes=1), ["topic-deleted"])["new"] == 1
    assert _state(engine)["topic-deleted"] == [("firing", None)]


def test_a_share_group_is_gone_only_by_a_known_listing_of_a_cluster_that_has_share_groups(
    engine: Engine,
) -> None:
    """A share group missing from the newest listing is gone; with no listing known (a sample
    written before the listing was kept) or share groups not available, none is."""
    _store(engine, gone=True)  # q-deleted is not listed
    for listed, available, gone in ((None, True, 0), (["q-alive"], False, 0), (["q-alive"], True, 1)):
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM findings WHERE cluster = :c"), {"c": C})
            conn.execute(
                text("UPDATE share_group_support SET listed = :l, available = :a WHERE cluster = :c"),
                {"c": C, "l": listed, "a": available},
            )
        first = _merge(engine, T, ["sg-deleted"])
        assert first["new"] == 1 - gone, (listed, available)

"""The alert cycle with a memory (monitor.alert.memory) against the reference, the cycle that reads
every open finding and alert: the same story of findings merged as the evaluation merges them
(two clusters, new, changed, re-rated and resolved findings, a broker down inhibiting, a silence
that starts and ends, an acknowledgement, the teams of owners.yaml changed, another instance's
cycle, a cycle that rolls back) gives the same notifications, alerts and incidents after every
cycle; and the memory reads only what changed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from monitor.alert import actions
from monitor.alert.config import Routing, default_routing_paths, load_routing
from monitor.alert.cycle import CycleResult, run_cycle
from monitor.alert.memory import READ_ALL_EVERY, CycleMemory
from monitor.core.identity import Identity
from monitor.store.findings import Match, merge_findings

T0 = datetime(2031, 7, 1, 9, 0, tzinfo=UTC)
URL = "http://monitor.test"
RULES = ("PartitionReplicaLost", "PartitionReplicasLost", "BrokerDown")
PLATFORM = Identity("alice", frozenset({"kafka-platform"}), "proxy")


@pytest.fixture
def db(engine: Engine) -> Iterator[Engine]:
    _empty(engine)
    yield engine


def _empty(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(
            text(
                "TRUNCATE findings, alerts, alert_groups, acks, silences, notification_outbox,"
                " notification_log, change_versions RESTART IDENTITY"
            )
        )


@pytest.fixture(scope="module")
def routings(tmp_path_factory: pytest.TempPathFactory) -> tuple[Routing, Routing]:
    """The shipped routing with an owners file in which team `payments` owns topic `orders`, and
    the same with the team owning nothing (an edit of owners.yaml)."""
    shipped, _ = default_routing_paths()
    directory = tmp_path_factory.mktemp("owners")
    routings: list[Routing] = []
    for topics in (["orders"], ["nothing-here"]):
        owners = directory / f"owners-{len(routings)}.yaml"
        owners.write_text(
            json.dumps({"teams": [{"name": "payments", "receivers": ["ops-slack"], "topics": topics}]})
        )
        routings.append(load_routing(Path(shipped), owners))
    return routings[0], routings[1]


def partition(rule: str, severity: str, cluster: str, topic: str, number: int, value: float = 1) -> Match:
    return Match(
        rule=rule,
        entity="partition",
        entity_key=f"{cluster}/{topic}/{number}",
        cluster=cluster,
        severity=severity,
        value=value,
        summary=f"{topic}[{number}] on {cluster}: {rule} ({value:g})",
        description="",
        for_seconds=0,
        labels={"cluster": cluster, "topic": topic, "partition": str(number)},
    )


def broker_down(cluster: str, broker: int) -> Match:
    return Match(
        rule="BrokerDown",
        entity="broker",
        entity_key=f"{cluster}/{broker}",
        cluster=cluster,
        severity="critical",
        value=1,
        summary=f"broker {broker} of {cluster} is down",
        description="",
        for_seconds=0,
        labels={"cluster": cluster, "broker_id": str(broker)},
    )


@dataclass
class Runner:
    """Runs the story's cycles, with one memory kept across them or none (the reference)."""

    engine: Engine
    memory: CycleMemory | None
    results: list[CycleResult] = field(default_factory=list)

    def merge(self, cluster: str, at: datetime, *matches: Match) -> None:
        with self.engine.begin() as conn:
            merge_findings(conn, list(matches), at, clusters=[cluster], rules=RULES)

    def cycle(self, routing: Routing, at: datetime, memory: CycleMemory | None = None) -> dict[str, Any]:
        memory = self.memory if memory is None else memory
        with self.engine.begin() as conn:
            result = run_cycle(conn, routing, at, URL, memory)
        if memory is not None:
            memory.committed(result.alerts_version)
        self.results.append(result)
        return _snapshot(self.engine, result)


def _snapshot(engine: Engine, result: CycleResult) -> dict[str, Any]:
    """What a cycle decided, without the random tokens and the ids."""
    notices = sorted(
        (
            n.receiver,
            n.kind,
            n.group_key,
            n.severity,
            tuple((a.fingerprint, a.state, a.severity, a.summary) for a in n.alerts),
        )
        for n in result.notifications
    )
    with engine.connect() as conn:
        alerts = [
            tuple(r)
            for r in conn.execute(
                text(
                    "SELECT fingerprint, state, severity, labels::text, summary, value, silenced_by,"
                    " inhibited_by IS NOT NULL, pending_since, starts_at, resolved_at, resolved_reason, updated_at"
                    " FROM alerts ORDER BY fingerprint, id"
                )
            )
        ]
        groups = [
            tuple(r)
            for r in conn.execute(
                text(
                    "SELECT receiver, group_key, severity, first_notified_at, last_notified_at, notified::text,"
                    " acknowledged_at, ack_notified_at, escalated_at, closed_at"
                    " FROM alert_groups ORDER BY receiver, group_key, created_at"
                )
            )
        ]
    return {"notices": notices, "alerts": alerts, "groups": groups, "counts": result.alerts}


Step = Callable[[Runner, datetime], None]


def _story(routing: Routing, edited: Routing) -> list[tuple[str, Step, Routing]]:
    """(what happens, the step before the cycle, the routing the cycle runs with)."""

    def replicas_lost(r: Runner, at: datetime) -> None:
        r.merge(
            "prod",
            at,
            partition("PartitionReplicaLost", "warning", "prod", "orders", 0),
            partition("PartitionReplicaLost", "warning", "prod", "orders", 1),
        )
        r.merge("dev", at)

    def nothing(r: Runner, at: datetime) -> None:
        return None

    def prod_lost(first: str, value: float) -> Step:
        """Both prod partitions still lost a replica, the first one rated `first`, at `value`."""

        def step(r: Runner, at: datetime) -> None:
            r.merge(
                "prod",
                at,
                partition("PartitionReplicaLost", first, "prod", "orders", 0, value=value),
                partition("PartitionReplicaLost", "warning", "prod", "orders", 1, value=value),
            )

        return step

    def dev_breaks(r: Runner, at: datetime) -> None:
        r.merge(
            "dev",
            at,
            broker_down("dev", 2),
            partition("PartitionReplicaLost", "warning", "dev", "payments", 0),
            partition("PartitionReplicasLost", "critical", "dev", "payments", 1),
        )

    def silence_dev(r: Runner, at: datetime) -> None:
        with r.engine.begin() as conn:
            actions.create_silence(
                conn,
                PLATFORM,
                matchers=["cluster=dev"],
                comment="maintenance",
                now=at,
                duration=timedelta(minutes=10),
                max_duration=timedelta(days=1),
                platform_teams={"kafka-platform"},
            )

    def prod_rerated(r: Runner, at: datetime) -> None:
        r.merge("prod", at, partition("PartitionReplicasLost", "critical", "prod", "orders", 0))

    def acknowledge(r: Runner, at: datetime) -> None:
        with r.engine.begin() as conn:
            group_id = conn.execute(
                text(
                    "SELECT min(id) FROM alert_groups WHERE closed_at IS NULL AND first_notified_at IS NOT NULL"
                )
            ).scalar_one()
            actions.acknowledge(conn, PLATFORM, now=at, group_id=group_id, platform_teams={"kafka-platform"})

    def dev_recovers(r: Runner, at: datetime) -> None:
        r.merge("dev", at)

    def prod_recovers(r: Runner, at: datetime) -> None:
        r.merge("prod", at)

    return [
        ("two replicas lost on prod", replicas_lost, routing),
        ("quiet: the first notice after group_wait", nothing, routing),
        ("the values move", prod_lost("warning", 2), routing),
        ("quiet", nothing, routing),
        ("prod: a partition re-rated", prod_lost("critical", 3), routing),
        ("dev: a broker down and two partitions", dev_breaks, routing),
        ("a silence over dev", silence_dev, routing),
        ("quiet", nothing, routing),
        ("prod: one re-rated, one resolved", prod_rerated, routing),
        ("the team owning orders changes", nothing, edited),
        ("quiet after the edit", nothing, edited),
        ("an incident acknowledged", acknowledge, edited),
        ("quiet while the silence ends", nothing, edited),
        ("dev recovers", dev_recovers, edited),
        ("quiet", nothing, edited),
        ("prod recovers", prod_recovers, edited),
        ("quiet after all resolved", nothing, edited),
    ]


def _run(
    engine: Engine, routings: tuple[Routing, Routing], memory: CycleMemory | None
) -> tuple[list[dict[str, Any]], list[CycleResult]]:
    _empty(engine)
    runner = Runner(engine, memory)
    snapshots = []
    for n, (what, step, routing) in enumerate(_story(*routings)):
        at = T0 + timedelta(minutes=3 * n)
        step(runner, at)
        snapshots.append({"step": f"{n}: {what}", **runner.cycle(routing, at + timedelta(seconds=5))})
    return snapshots, runner.results


def test_a_cycle_with_a_memory_decides_what_the_full_read_decides(
    db: Engine, routings: tuple[Routing, Routing]
) -> None:
    reference, _ = _run(db, routings, None)
    kept, results = _run(db, routings, CycleMemory(read_all_every=timedelta(days=1)))
    for full, from_memory in zip(reference, kept, strict=True):
        assert from_memory == full, full["step"]
    # The story is not trivial: it notified, muted, acknowledged and closed.
    kinds = {notice[1] for snapshot in reference for notice in snapshot["notices"]}
    assert {"firing", "resolved", "acknowledge"} <= kinds
    assert any(alert[6] is not None for alert in reference[7]["alerts"]), "the silence mutes dev"
    assert any(alert[7] for alert in reference[6]["alerts"]), "the broker down inhibits"
    # And the memory read only what changed: nothing when no evaluation merged, the merged
    # cluster when one did; everything again when the teams changed.
    reads = [(r.full_read, r.clusters_read, r.findings_read) for r in results]
    assert reads == [
        (True, (), 2),
        (False, (), 0),
        (False, ("prod",), 2),
        (False, (), 0),
        (False, ("prod",), 2),
        (False, ("dev",), 3),
        (False, (), 0),  # a silence: no finding read, the alerts muted again
        (False, (), 0),
        (False, ("prod",), 1),
        (True, (), 4),  # owners.yaml changed the teams, which label the alerts
        (False, (), 0),
        (False, (), 0),  # an acknowledgement changes the incident, not the alerts
        (False, (), 0),
        (False, ("dev",), 0),
        (False, (), 0),
        (False, ("prod",), 0),
        (False, (), 0),
    ]


def test_another_instances_cycle_ten_minutes_or_a_rollback_make_a_cycle_read_everything(
    db: Engine, routings: tuple[Routing, Routing]
) -> None:
    routing = routings[0]
    mine, theirs = CycleMemory(), CycleMemory()
    runner = Runner(db, mine)
    runner.merge("prod", T0, partition("PartitionReplicaLost", "warning", "prod", "orders", 0))
    runner.cycle(routing, T0)
    runner.cycle(routing, T0 + timedelta(seconds=10))
    assert runner.results[-1].full_read is False
    # Another instance (a lease that moved) decides a cycle after a merge this one did not see.
    runner.merge(
        "prod",
        T0 + timedelta(seconds=20),
        partition("PartitionReplicasLost", "critical", "prod", "orders", 1),
    )
    runner.cycle(routing, T0 + timedelta(seconds=25), memory=theirs)
    mine_next = runner.cycle(routing, T0 + timedelta(seconds=30))
    assert runner.results[-1].full_read is True
    assert [a[0] for a in mine_next["alerts"]] == sorted(a[0] for a in mine_next["alerts"])
    assert len({a[0] for a in mine_next["alerts"]}) == 2, "no alert inserted twice"
    # Ten minutes after the last full read, a cycle reads everything again, which takes up a row
    # changed by hand (nothing raised a counter for it).
    with db.begin() as conn:
        conn.execute(text("UPDATE findings SET summary = 'changed by hand' WHERE state <> 'resolved'"))
    runner.cycle(routing, T0 + timedelta(seconds=35))
    assert runner.results[-1].full_read is False
    runner.cycle(routing, T0 + READ_ALL_EVERY + timedelta(seconds=30))
    assert runner.results[-1].full_read is True
    with db.connect() as conn:
        summaries = conn.execute(text("SELECT summary FROM alerts WHERE state <> 'resolved'")).all()
    assert summaries == [("changed by hand",)]
    # A cycle whose transaction did not commit leaves no memory the next one uses.
    later = T0 + READ_ALL_EVERY + timedelta(seconds=30)
    runner.cycle(routing, later + timedelta(seconds=5))
    assert runner.results[-1].full_read is False
    runner.merge("prod", later + timedelta(seconds=10))
    with pytest.raises(RuntimeError), db.begin() as conn:
        run_cycle(conn, routing, later + timedelta(seconds=15), URL, mine)
        raise RuntimeError("the commit failed")
    runner.cycle(routing, later + timedelta(seconds=20))
    assert runner.results[-1].full_read is True
    with db.connect() as conn:
        open_alerts = conn.execute(text("SELECT count(*) FROM alerts WHERE state <> 'resolved'")).scalar_one()
    assert open_alerts == 0

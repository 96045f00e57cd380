"""The pure steps of the alert cycle behind what a notice says and when: the worst partitions of
a consumer group, the impact an inhibiting alert carries, `still_notify`, resolved alerts inside a
still-firing group, and the re-check of a due notice when it is sent."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from monitor.alert.alerts import AlertRow
from monitor.alert.config import Routing, default_routing_paths, load_routing
from monitor.alert.details import is_flagged, worst_partitions
from monitor.alert.dispatch.groups import Group, GroupRow, route_groups
from monitor.alert.dispatch.planner import Planner, notified_as
from monitor.alert.model import PartitionDetail
from monitor.alert.mute.impact import impact_of, signature
from monitor.alert.mute.inhibit import apply_inhibition
from monitor.alert.notify.recheck import DropReason, stale_reason
from tests.fixtures.receivers import sample_notification

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def shipped() -> Routing:
    return load_routing(*default_routing_paths())


def detail(
    partition: int, status: str, lag: int = 10, loss: float | None = None, seconds: float = 5.0
) -> PartitionDetail:
    return PartitionDetail("t", partition, status, None, lag, seconds, loss)


def alert(rule: str, severity: str, key: str, *, at: datetime = T0, **labels: str) -> AlertRow:
    return AlertRow(
        id=None,
        fingerprint=f"fp-{rule}-{key}",
        rule=rule,
        cluster="prod",
        entity="partition",
        entity_key=key,
        labels={"cluster": "prod", "rule": rule, "severity": severity, **labels},
        severity=severity,
        state="firing",
        summary=f"{rule} on {key}",
        description="",
        value=1.0,
        annotations={},
        pending_since=at,
        starts_at=at,
    )


# ---------------------------------------------------------------------------------------------
# Worst partitions


WORST_CASES = [
    # (number, partitions, expected order, flagged)
    (1, [detail(0, "OK", lag=0), detail(1, "WARN")], [1], 1),
    (2, [detail(0, "STOP"), detail(1, "REWIND"), detail(2, "STALL"), detail(3, "ERR")], [1, 2, 0, 3], 4),
    (3, [detail(0, "STOP", loss=600.0), detail(1, "STOP", loss=60.0), detail(2, "STOP")], [1, 0, 2], 3),
    (4, [detail(0, "WARN", seconds=5), detail(1, "WARN", seconds=500)], [1, 0], 2),
    (5, [detail(0, "OK", lag=0, loss=30.0)], [0], 1),  # at risk while OK: still named
    (6, [detail(p, "STOP") for p in range(9)], [0, 1, 2, 3, 4], 9),
]


@pytest.mark.parametrize(
    ("number", "rows", "order", "flagged"), WORST_CASES, ids=[f"case{c[0]}" for c in WORST_CASES]
)
def test_worst_partitions(number: int, rows: list[PartitionDetail], order: list[int], flagged: int) -> None:
    worst, total = worst_partitions(rows)
    assert [d.partition for d in worst] == order
    assert total == flagged == sum(is_flagged(d) for d in rows)


# ---------------------------------------------------------------------------------------------
# Impact and still_notify


def test_a_source_carries_what_it_covers_worst_first_and_tells_what_is_worse(shipped: Routing) -> None:
    broker = alert("BrokerDown", "critical", "prod/3", broker_id="3")
    echoes = [
        alert("PartitionReplicaLost", "warning", f"prod/t/{p}", topic="t", partition=str(p)) for p in range(3)
    ]
    writes = alert("PartitionUnderMinIsr", "critical", "prod/o/1", topic="o", partition="1")
    lost = alert("PartitionReplicasLost", "critical", "prod/p/0", topic="p", partition="0")
    other = alert("PartitionReplicaLost", "warning", "staging/t/0", topic="t", partition="0")
    other.cluster = other.labels["cluster"] = "staging"
    alerts = [broker, *echoes, writes, lost, other]
    apply_inhibition(alerts, shipped.inhibit_rules)
    assert [a.inhibited_by for a in echoes] == [broker.fingerprint] * 3
    assert writes.inhibited_by is None and lost.inhibited_by is None, "worse than the source: told"
    assert other.inhibited_by is None, "another cluster"
    assert broker.impact is not None
    assert broker.impact.counts == {
        "PartitionUnderMinIsr": 1,
        "PartitionReplicasLost": 1,
        "PartitionReplicaLost": 3,
    }
    assert [i.entity_key for i in broker.impact.worst][:2] == ["prod/o/1", "prod/p/0"]
    assert broker.impact.total == 5
    assert writes.impact is None
    view = broker.view()
    assert view.impact == broker.impact


def test_impact_lists_a_handful_and_counts_the_rest() -> None:
    covered = [alert("PartitionReplicaLost", "warning", f"prod/t/{p}") for p in range(40)]
    impact = impact_of(covered)
    assert impact is not None and impact.total == 40 and len(impact.worst) == 5
    assert impact_of([]) is None


def test_news_of_a_source_is_a_new_kind_of_impact_not_a_new_count() -> None:
    broker = alert("BrokerDown", "critical", "prod/3")
    assert notified_as(broker) == "critical"
    broker.impact = impact_of([alert("PartitionReplicaLost", "warning", "prod/t/0")])
    before = notified_as(broker)
    broker.impact = impact_of([alert("PartitionReplicaLost", "warning", f"prod/t/{p}") for p in range(5)])
    assert notified_as(broker) == before
    broker.impact = impact_of([alert("PartitionUnderMinIsr", "critical", "prod/t/0")])
    assert notified_as(broker) != before
    assert signature(None) == ""


def test_still_notify_is_checked_when_the_file_is_loaded(tmp_path: Path) -> None:
    from monitor.core.errors import ConfigError

    routing = tmp_path / "routing.yaml"
    routing.write_text(
        "receivers:\n  - name: c\n    console: {}\nroute:\n  receiver: c\n"
        "inhibit_rules:\n  - source_matchers: [rule=A]\n    target_matchers: [rule=B]\n"
        "    still_notify: ['severity=~(']\n"
    )
    with pytest.raises(ConfigError, match="still_notify"):
        load_routing(routing)


# ---------------------------------------------------------------------------------------------
# Resolved alerts inside a still-firing group


def _open_group(planner: Planner, routing: Routing, alerts: list[AlertRow]) -> tuple[GroupRow, Group]:
    """The ops-slack group of `alerts`, opened at T0 and planned at `planner.now`."""
    (key, group), *_ = [(k, g) for k, g in route_groups(alerts, routing).items() if k[0] == "ops-slack"]
    row = Planner(routing, T0, "http://x").new_group(key[0], key[1], group)
    planner.plan_open(row, group)
    return row, group


def test_resolved_alerts_of_a_firing_group_are_news_once(shipped: Routing) -> None:
    a0 = alert("PartitionReplicaLost", "warning", "prod/t/0", topic="t", partition="0")
    a1 = alert("PartitionReplicaLost", "warning", "prod/t/1", topic="t", partition="1")
    planner = Planner(shipped, T0 + timedelta(seconds=30), "http://x")
    row, group = _open_group(planner, shipped, [a0, a1])
    assert [n.kind for n in planner.notifications] == ["firing"]
    gone = replace(a1.view(), state="resolved", ends_at=T0 + timedelta(seconds=40))
    group.alerts = [a0]
    later = Planner(shipped, T0 + timedelta(seconds=60), "http://x")
    later.plan_open(row, group, [gone])
    assert later.notifications == [], "within group_interval"
    later = Planner(shipped, T0 + timedelta(seconds=150), "http://x")
    later.plan_open(row, group, [gone])
    (told,) = later.notifications
    assert [a.entity_key for a in told.firing] == ["prod/t/0"]
    assert [a.entity_key for a in told.resolved] == ["prod/t/1"]
    assert row.notified == {a0.fingerprint: "warning"}


def test_details_are_read_only_for_alerts_about_to_be_told(shipped: Routing) -> None:
    asked: list[str] = []

    def details(a: AlertRow) -> tuple[tuple[PartitionDetail, ...], int]:
        asked.append(a.fingerprint)
        return (detail(0, "STOP"),), 1

    a0 = alert("ConsumerGroupNoMembers", "warning", "prod/g", group_id="g")
    planner = Planner(shipped, T0 + timedelta(seconds=10), "http://x", details)
    _open_group(planner, shipped, [a0])
    assert planner.notifications == [] and asked == [], "group_wait: nothing told, nothing read"
    planner = Planner(shipped, T0 + timedelta(seconds=30), "http://x", details)
    _open_group(planner, shipped, [a0])
    assert planner.notifications[0].alerts[0].partitions == (detail(0, "STOP"),)
    assert asked == [a0.fingerprint]


# ---------------------------------------------------------------------------------------------
# Re-check when sent


RECHECK_CASES = [
    # (number, case, kind, states, announced, reason)
    (1, "single_critical", "firing", {"fp-orders/3": "firing"}, True, None),
    (2, "single_critical", "firing", {"fp-orders/3": "resolved"}, True, DropReason.ALL_RESOLVED),
    (3, "single_critical", "repeat", {"fp-orders/3": "resolved"}, True, DropReason.ALL_RESOLVED),
    (4, "single_critical", "firing", {}, True, None),  # no alert row (a notice): always true
    (5, "group_stopped", "firing", {"fp-billing": "firing", "fp-ledger": "resolved"}, True, None),
    (
        6,
        "group_stopped",
        "firing",
        {"fp-billing": "resolved", "fp-ledger": "resolved"},
        True,
        DropReason.ALL_RESOLVED,
    ),
    (7, "resolved", "resolved", {}, True, None),
    (8, "resolved", "resolved", {}, False, DropReason.NEVER_ANNOUNCED),
    (9, "acknowledged", "acknowledge", {"fp-orders/3": "resolved"}, True, None),
]


@pytest.mark.parametrize(
    ("number", "case", "kind", "states", "announced", "reason"),
    RECHECK_CASES,
    ids=[f"case{c[0]}" for c in RECHECK_CASES],
)
def test_stale_reason(
    number: int, case: str, kind: str, states: dict[str, str], announced: bool, reason: DropReason | None
) -> None:
    notification = replace(sample_notification(case), kind=kind)  # type: ignore[arg-type]
    assert stale_reason(notification, states, announced) == reason

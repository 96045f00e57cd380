"""The alert cycle's pure steps, one at a time, without a database: alerts from findings, muting
(silences, inhibition), groups, and each group's timing, escalation, acknowledgement and closing."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.alert.alerts import AlertRow, fingerprint, merge_alerts
from monitor.alert.config import Routing
from monitor.alert.dispatch.groups import Group, GroupRow, group_key, most_severe, route_groups
from monitor.alert.dispatch.planner import Planner
from monitor.alert.dispatch.route import GROUP_BY_ALL, Route, RouteMatch, root_defaults
from monitor.alert.matchers import parse_matchers
from monitor.alert.mute.inhibit import InhibitRule, apply_inhibition
from monitor.alert.mute.silence import SilenceRow, apply_silences

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def finding(
    rule: str, key: str, severity: str = "warning", state: str = "firing", **labels: str
) -> dict[str, Any]:
    return {
        "rule": rule,
        "entity": "consumer_group",
        "entity_key": key,
        "cluster": "prod",
        "labels": labels,
        "severity": severity,
        "value": 1.0,
        "summary": f"{rule} on {key}",
        "description": "",
        "annotations": {},
        "state": state,
    }


def no_team(labels: Mapping[str, str]) -> str | None:
    return None


def alert(rule: str, key: str, severity: str = "warning", at: datetime = T0, **labels: str) -> AlertRow:
    return AlertRow(
        id=None,
        fingerprint=fingerprint(rule, key),
        rule=rule,
        cluster="prod",
        entity="consumer_group",
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


def routing(
    *,
    group_by: tuple[str, ...] = ("cluster", "rule"),
    escalate_after: int | None = None,
    send_resolved: bool = True,
    receiver: str = "chat",
    inhibit: tuple[InhibitRule, ...] = (),
) -> Routing:
    match = RouteMatch(
        receiver=receiver,
        group_by=group_by,
        group_wait=30,
        group_interval=120,
        repeat_interval=3600,
        escalate_after=escalate_after,
        escalate_to="pager" if escalate_after is not None else None,
        send_resolved=send_resolved,
        route_path="root",
    )
    configs: dict[str, Mapping[str, Any]] = {
        "chat": {"name": "chat", "console": {}},
        "pager": {"name": "pager", "pagerduty": {"routing_key_env": "KEY"}},
    }
    return Routing(Route((), False, match), configs, inhibit)


# ---------------------------------------------------------------------------------------------
# 1. Alerts from findings


def test_an_alert_is_pending_until_its_finding_fires_then_resolves_when_the_finding_is_gone() -> None:
    current, resolved = merge_alerts({}, [finding("Lag", "prod/g", state="pending")], no_team, T0)
    (row,) = current.values()
    assert (row.state, row.pending_since, row.starts_at, row.changed) == ("pending", T0, None, True)
    assert row.fingerprint == fingerprint("Lag", "prod/g") and resolved == []

    later = T0 + timedelta(minutes=5)
    current, resolved = merge_alerts(current, [finding("Lag", "prod/g")], no_team, later)
    assert (row.state, row.pending_since, row.starts_at) == ("firing", T0, later), "pending_since is kept"

    row.changed = False
    current, _ = merge_alerts(current, [finding("Lag", "prod/g")], no_team, later)
    assert not row.changed, "the same finding again is no news"
    current, _ = merge_alerts(current, [finding("Lag", "prod/g", severity="critical")], no_team, later)
    assert row.changed and row.severity == row.labels["severity"] == "critical", "re-rated, same alert"

    gone = T0 + timedelta(minutes=9)
    current, resolved = merge_alerts(current, [], no_team, gone)
    assert current == {} and resolved == [row]
    assert (row.state, row.resolved_at) == ("resolved", gone)


def test_the_owning_team_becomes_a_label() -> None:
    current, _ = merge_alerts({}, [finding("Lag", "prod/g", group_id="pay-app")], lambda _: "payments", T0)
    (row,) = current.values()
    assert row.labels == {
        "group_id": "pay-app",
        "rule": "Lag",
        "cluster": "prod",
        "entity": "consumer_group",
        "severity": "warning",
        "team": "payments",
    }


# ---------------------------------------------------------------------------------------------
# 2. Muting


def test_a_silence_mutes_firing_alerts_it_matches_and_a_broken_one_mutes_nothing() -> None:
    muted, other, pending = (
        alert("Lag", "a", group_id="a"),
        alert("Lag", "b", group_id="b"),
        alert("Lag", "c"),
    )
    pending.state = "pending"
    pending.labels["group_id"] = "a"
    silences = [SilenceRow(1, ("group_id=~a[",)), SilenceRow(2, ("group_id=a",))]
    apply_silences([muted, other, pending], silences)
    assert (muted.silenced_by, other.silenced_by, pending.silenced_by) == (2, None, None)
    assert muted.changed and not other.changed

    apply_silences([muted], [])
    assert muted.silenced_by is None, "an expired silence no longer mutes"


def test_inhibition_mutes_targets_sharing_the_equal_labels_never_the_source_itself() -> None:
    rule = InhibitRule(parse_matchers(["rule=Down"]), parse_matchers(["severity=warning"]), ("cluster",))
    source = alert("Down", "prod/1", severity="warning")
    target = alert("Lag", "prod/g")
    elsewhere = alert("Lag", "staging/g")
    elsewhere.labels["cluster"] = "staging"
    apply_inhibition([source, target, elsewhere], [rule])
    assert (source.inhibited_by, target.inhibited_by, elsewhere.inhibited_by) == (
        None,
        source.fingerprint,
        None,
    )
    assert source.impact is not None and source.impact.total == 1
    assert target.impact is None


def test_only_after_source_spares_what_was_wrong_before_the_cause() -> None:
    rule = InhibitRule(
        parse_matchers(["rule=Down"]), parse_matchers(["rule=Lag"]), ("cluster",), only_after_source=True
    )
    source = alert("Down", "prod/1", at=T0)
    before = alert("Lag", "prod/early", at=T0 - timedelta(minutes=1))
    after = alert("Lag", "prod/late", at=T0 + timedelta(minutes=1))
    apply_inhibition([source, before, after], [rule])
    assert (before.inhibited_by, after.inhibited_by) == (None, source.fingerprint)


def test_a_source_that_stops_firing_releases_its_targets() -> None:
    rule = InhibitRule(parse_matchers(["rule=Down"]), parse_matchers(["rule=Lag"]), ())
    source, target = alert("Down", "prod/1"), alert("Lag", "prod/g")
    apply_inhibition([source, target], [rule])
    assert target.inhibited_by == source.fingerprint
    source.state = "pending"
    target.changed = False
    apply_inhibition([source, target], [rule])
    assert target.inhibited_by is None and target.changed


# ---------------------------------------------------------------------------------------------
# 3. Groups


@pytest.mark.parametrize(
    ("number", "group_by", "labels", "expected"),
    [
        (
            1,
            ("cluster", "rule"),
            {"cluster": "prod", "rule": "Lag", "group_id": "g"},
            {"cluster": "prod", "rule": "Lag"},
        ),
        (
            2,
            ("cluster", "group_id"),
            {"cluster": "prod", "rule": "Lag"},
            {"cluster": "prod"},
        ),  # missing: left out
        (3, (GROUP_BY_ALL,), {"rule": "Lag", "cluster": "prod"}, {"cluster": "prod", "rule": "Lag"}),
    ],
    ids=["case1", "case2", "case3"],
)
def test_group_key(
    number: int, group_by: tuple[str, ...], labels: dict[str, str], expected: dict[str, str]
) -> None:
    match = RouteMatch("chat", group_by, 30, 120, 3600, None, None, True, "root/0")
    key, chosen = group_key(match, labels)
    assert chosen == expected
    assert key.startswith("root/0:") and list(chosen) == sorted(chosen)


def test_only_unmuted_firing_alerts_are_grouped_per_receiver_and_group_labels() -> None:
    a, b, other = alert("Lag", "prod/a"), alert("Lag", "prod/b", severity="critical"), alert("Stop", "prod/c")
    silenced, inhibited, pending = alert("Lag", "prod/s"), alert("Lag", "prod/i"), alert("Lag", "prod/p")
    silenced.silenced_by, inhibited.inhibited_by, pending.state = 7, a.fingerprint, "pending"
    groups = route_groups([a, b, other, silenced, inhibited, pending], routing())
    by_rule = {group.labels["rule"]: group for group in groups.values()}
    assert set(by_rule) == {"Lag", "Stop"}
    assert by_rule["Lag"].alerts == [a, b] and by_rule["Stop"].alerts == [other]
    assert {receiver for receiver, _ in groups} == {"chat"}
    assert most_severe(x.severity for x in by_rule["Lag"].alerts) == "critical"
    assert most_severe([]) == "info"


# ---------------------------------------------------------------------------------------------
# 4. Notifications: timing, escalation, acknowledgement, closing


def opened(planner: Planner, alerts: list[AlertRow]) -> tuple[GroupRow, Group]:
    ((receiver, key), group), *_ = route_groups(alerts, planner.routing).items()
    return planner.new_group(receiver, key, group), group


def at(routes: Routing, seconds: float) -> Planner:
    return Planner(routes, T0 + timedelta(seconds=seconds), "http://kh.test/")


def test_first_notice_waits_group_wait_then_news_waits_group_interval_and_repeats_wait_repeat_interval() -> (
    None
):
    routes = routing()
    lag = alert("Lag", "prod/a")
    row, group = opened(at(routes, 0), [lag])
    timeline = [
        (10, [lag], []),  # within group_wait: nothing
        (30, [lag], ["firing"]),  # group_wait over: the first notice
        (60, [lag, alert("Lag", "prod/b")], []),  # news, but within group_interval of the last notice
        (150, [lag, alert("Lag", "prod/b")], ["firing"]),  # group_interval over: the news
        (600, [lag, alert("Lag", "prod/b")], []),  # nothing new, no repeat yet
        (150 + 3600, [lag, alert("Lag", "prod/b")], ["repeat"]),  # repeat_interval over
    ]
    for seconds, alerts, kinds in timeline:
        planner = at(routes, seconds)
        planner.plan_open(row, Group(group.match, group.labels, alerts))
        assert [n.kind for n in planner.notifications] == kinds, seconds
    assert row.first_notified_at == T0 + timedelta(seconds=30)
    assert row.last_notified_at == T0 + timedelta(seconds=3750)
    assert row.notified == {a.fingerprint: "warning" for a in [lag, alert("Lag", "prod/b")]}


def test_an_acknowledged_group_is_not_repeated_and_the_ack_is_passed_on_once() -> None:
    routes = routing()
    row, group = opened(at(routes, 0), [alert("Lag", "prod/a")])
    at(routes, 30).plan_open(row, group)
    row.acknowledged_at, row.acknowledged_by = T0 + timedelta(seconds=60), "ana"
    planner = at(routes, 90)
    planner.plan_open(row, group)
    (ack,) = planner.notifications
    assert (ack.kind, ack.extra) == ("acknowledge", {"acknowledged_by": "ana"})
    planner = at(routes, 30 + 7200)
    planner.plan_open(row, group)
    assert planner.notifications == [], "acknowledged: no repeat, and the ack is told once"


@pytest.mark.parametrize(
    ("number", "severity", "acknowledged", "seconds", "escalated"),
    [
        (1, "warning", False, 30 + 3599, False),  # not yet
        (2, "warning", False, 30 + 3600, True),  # an unacknowledged warning past escalate_after
        (3, "warning", True, 30 + 3600, False),  # acknowledged: someone is on it
        (4, "critical", False, 30 + 3600, False),  # a critical alert pages from its route already
    ],
    ids=[f"case{n}" for n in range(1, 5)],
)
def test_escalation(number: int, severity: str, acknowledged: bool, seconds: int, escalated: bool) -> None:
    routes = routing(escalate_after=3600)
    row, group = opened(at(routes, 0), [alert("Lag", "prod/a", severity=severity)])
    at(routes, 30).plan_open(row, group)
    if acknowledged:
        row.acknowledged_at = row.ack_notified_at = T0 + timedelta(seconds=40)
    planner = at(routes, seconds)
    planner.plan_open(row, group)
    sent = [(n.kind, n.receiver, n.dedup_key) for n in planner.notifications if n.kind == "escalation"]
    assert sent == ([("escalation", "pager", row.dedup_key + ":esc")] if escalated else [])
    assert (row.escalated_to == "pager") is escalated
    if escalated:
        again = at(routes, seconds + 3600)
        again.plan_open(row, group)
        assert "escalation" not in [n.kind for n in again.notifications], "escalated once"


def test_closing_sends_resolved_where_the_route_asks_and_always_to_a_pager() -> None:
    for receiver, send_resolved, expected in [
        ("chat", True, ["resolved"]),
        ("chat", False, []),
        ("pager", False, ["resolved"]),  # a pager's incident closes only with a resolved notice
    ]:
        routes = routing(receiver=receiver, send_resolved=send_resolved)
        lag = alert("Lag", "prod/a")
        row, group = opened(at(routes, 0), [lag])
        at(routes, 30).plan_open(row, group)
        lag.state, lag.resolved_at = "resolved", T0 + timedelta(seconds=50)
        planner = at(routes, 60)
        planner.plan_closed(row, [lag.view()], send_resolved=send_resolved)
        assert [n.kind for n in planner.notifications] == expected, receiver
        assert row.closed_at == T0 + timedelta(seconds=60)


def test_a_group_closed_before_its_first_notice_tells_nobody() -> None:
    routes = routing()
    lag = alert("Lag", "prod/a")
    row, _ = opened(at(routes, 0), [lag])
    planner = at(routes, 10)
    planner.plan_closed(row, [lag.view(state="resolved")], send_resolved=True)
    assert planner.notifications == [] and row.closed_at is not None


def test_resolved_alerts_of_a_firing_group_are_news_except_to_a_pager() -> None:
    for receiver, told in [("chat", True), ("pager", False)]:
        routes = routing(receiver=receiver)
        a, b = alert("Lag", "prod/a"), alert("Lag", "prod/b")
        row, group = opened(at(routes, 0), [a, b])
        at(routes, 30).plan_open(row, group)
        b.state = "resolved"
        planner = at(routes, 200)
        planner.plan_open(row, Group(group.match, group.labels, [a]), [b.view()])
        notices = planner.notifications
        assert [n.kind for n in notices] == (["firing"] if told else []), receiver
        if told:
            assert [(v.fingerprint, v.state) for v in notices[0].alerts] == [
                (a.fingerprint, "firing"),
                (b.fingerprint, "resolved"),
            ]


def test_root_defaults() -> None:
    defaults = root_defaults()
    assert (defaults.group_wait, defaults.group_interval, defaults.repeat_interval) == (30, 120, 4 * 3600)
    assert defaults.send_resolved and defaults.escalate_to is None and defaults.route_path == "root"


def test_routing_alerts_alike_once_groups_exactly_as_routing_each_alone() -> None:
    """route_groups finds the receivers once per combination of the labels routing reads: the
    groups are the ones routing every alert on its own gives, with the shipped routing and teams."""
    from monitor.alert.config import default_routing_paths, load_routing

    shipped = load_routing(*default_routing_paths())
    alerts = [
        alert(rule, f"k{n}", severity, **labels)
        for n, (rule, severity, labels) in enumerate(
            (rule, severity, labels)
            for rule in ("ConsumerAppendLag", "BrokerDown", "PartitionOffline")
            for severity in ("warning", "critical")
            for labels in (
                {"group_id": "payments-consumer", "topic": "payments.events", "partition": "0"},
                {"group_id": "payments-consumer", "topic": "payments.events", "partition": "1"},
                {"group_id": "orders", "topic": "orders", "page": "true"},
                {"broker_id": "3"},
                {"topic": "billing.ledger", "team": "billing", "partition": "2"},
            )
        )
    ]
    expected: dict[tuple[str, str], list[str]] = {}
    for a in alerts:
        for match in shipped.receivers_for(a.labels):
            key, _ = group_key(match, a.labels)
            expected.setdefault((match.receiver, key), []).append(a.fingerprint)

    found = route_groups(alerts, shipped)

    assert {k: [a.fingerprint for a in g.alerts] for k, g in found.items()} == expected
    assert len(expected) > 3, "the shipped routing sends these to several groups"
    assert all(g.labels == group_key(g.match, g.alerts[0].labels)[1] for g in found.values())

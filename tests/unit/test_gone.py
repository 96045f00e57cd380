"""Entities the cluster no longer has: which unsampled committed offsets are gone for good, the
reason an alert resolves with, a broker unregistered told apart from one that is down, and the
words for a committed offset beyond the log end."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

import pytest

from monitor.alert.alerts import merge_alerts
from monitor.collect.lag import gone_for_good
from monitor.core.clock import to_millis
from monitor.core.vocabulary import COMMITTED_BEYOND_END, RESOLVE_REASONS, RESOLVED_GONE
from monitor.kafka.fake import FakeCluster, FakeKafkaAdmin
from tests.fixtures.collect import T0 as RIG_T0
from tests.fixtures.collect import Rig

pytestmark = pytest.mark.unit

T0 = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
KEYS = [("billing", "invoices", 0), ("billing", "invoices", 1), ("audit", "orders", 0)]


@pytest.mark.parametrize(
    ("listed", "answered", "expected"),
    [
        # A complete listing without the group: every key of it is gone.
        ({"audit"}, set(), [KEYS[0], KEYS[1]]),
        # The group listed, its offsets answered without the keys (offsets deleted or expired).
        ({"billing", "audit"}, {"billing", "audit"}, KEYS),
        # Listed, but its coordinator did not answer: only unsampled, not gone.
        ({"billing", "audit"}, set(), []),
        # The listing failed (None): only groups answered without the keys are gone.
        (None, {"audit"}, [KEYS[2]]),
        (None, set(), []),
    ],
)
def test_unsampled_offsets_are_gone_only_when_the_cluster_says_so(
    listed: set[str] | None, answered: set[str], expected: list[tuple[str, str, int]]
) -> None:
    assert gone_for_good(KEYS, listed, answered) == expected


def _finding(rule: str, key: str) -> dict[str, object]:
    return {
        "rule": rule, "entity": "group", "entity_key": key, "cluster": "prod", "labels": {},
        "severity": "warning", "value": 1.0, "summary": rule, "description": "", "annotations": {},
        "state": "firing",
    }  # fmt: skip


def _no_team(labels: Mapping[str, str]) -> str | None:
    return None


@pytest.mark.parametrize(
    ("reasons", "expected"),
    [
        ({("Lag", "prod/billing"): RESOLVED_GONE}, RESOLVED_GONE),
        ({}, None),
        ({("Lag", "prod/other"): RESOLVED_GONE}, None),
    ],
)
def test_an_alert_resolves_with_its_findings_reason(
    reasons: dict[tuple[str, str], str], expected: str | None
) -> None:
    current, _ = merge_alerts({}, [_finding("Lag", "prod/billing")], _no_team, T0)
    later = T0 + timedelta(minutes=1)
    current, resolved = merge_alerts(current, [], _no_team, later, reasons)
    assert current == {}
    assert [r.resolved_reason for r in resolved] == [expected]
    view = resolved[0].view()
    assert (view.state, view.resolved_reason) == ("resolved", expected)
    assert type(view).from_dict(view.to_dict()) == view


def test_a_firing_alert_shows_no_reason() -> None:
    current, _ = merge_alerts({}, [_finding("Lag", "prod/billing")], _no_team, T0)
    row = current[next(iter(current))]
    row.resolved_reason = RESOLVED_GONE  # stale from an earlier life: a firing view shows none
    assert row.view().resolved_reason is None


def test_a_broker_down_stays_registered_and_an_unregistered_one_is_gone() -> None:
    fake = FakeCluster("prod", brokers=3)
    admin = FakeKafkaAdmin(fake)
    admin.start()
    fake.stop_broker(2)
    fake.stop_broker(3)
    with pytest.raises(ValueError, match="alive"):
        fake.unregister_broker(1)
    fake.unregister_broker(3)
    info = admin.describe_cluster()
    assert (info.broker_ids, info.registered) == ([1], (1, 2))
    fake.start_broker(3)  # a broker that starts again registers again
    assert admin.describe_cluster().registered == (1, 2, 3)


def test_the_words_are_defined_once() -> None:
    assert RESOLVE_REASONS == ("gone",)
    assert COMMITTED_BEYOND_END == "committed beyond the end"


# -- the offsets job: what it tells the store is gone -------------------------------------------


def _rig() -> Rig:
    """Topic `orders` (3 partitions), groups `billing` (all three) and `audit` (partition 0)."""
    rig = Rig()
    rig.kafka.create_topic("orders", 3, 1)
    for p in range(3):
        rig.kafka.produce(
            "orders", p, timestamps_ms=[to_millis(RIG_T0) - 60_000 + 1000 * i for i in range(10)]
        )
    rig.kafka.commit("billing", {("orders", p): 4 for p in range(3)})
    rig.kafka.commit("audit", {("orders", 0): 2})
    return rig


def _delete_billing(rig: Rig) -> None:
    rig.kafka.delete_group("billing")


def _delete_one_offset(rig: Rig) -> None:
    rig.kafka.delete_offsets("billing", [("orders", 2)])


def _silence_billing(rig: Rig) -> None:
    coordinator = rig.kafka.coordinator("billing")
    assert coordinator is not None
    rig.kafka.silence_coordinator(coordinator)


def _fail_the_listing_and_delete(rig: Rig) -> None:
    rig.kafka.fail("list_group_ids")
    rig.kafka.delete_group("billing")


@pytest.mark.parametrize(
    ("change", "gone"),
    [
        (_delete_billing, [("billing", "orders", 0), ("billing", "orders", 1), ("billing", "orders", 2)]),
        (_delete_one_offset, [("billing", "orders", 2)]),
        (_silence_billing, []),  # not answered is not gone
        # The listing failed: the groups seen before stand in, and the deleted group's offsets
        # answered empty still say they are gone.
        (
            _fail_the_listing_and_delete,
            [("billing", "orders", 0), ("billing", "orders", 1), ("billing", "orders", 2)],
        ),
    ],
)
def test_the_offsets_job_tells_the_store_what_the_cluster_no_longer_has(
    change: Callable[[Rig], None], gone: list[tuple[str, str, int]]
) -> None:
    rig = _rig()
    rig.cycle()
    first = rig.batch().gone
    # The first complete listing after a start: every other group's rows are gone.
    assert first is not None and (first.keys, first.listed_groups) == ([], ["audit", "billing"])
    rig.cycle()
    assert rig.batch().gone is None  # nothing went, and the listing is sent once
    change(rig)
    run = rig.cycle()
    sent = rig.batch().gone
    assert (sorted(sent.keys) if sent is not None else []) == gone
    assert run.counts["group_partitions_gone"] == len(gone)

"""How the alerts page reads the alert tables in PostgreSQL: which section each open alert is in
and which incidents it is part of (numbered cases, each with the verdict it expects), each
section's count however few rows are shown, one page per section in the page's order, and the
first open incidents with their count."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from monitor.core.vocabulary import SEVERITY_RANK
from monitor.expose.read.alerts import SECTIONS, read_alerts

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
RULE = "TimeUntilDataLoss"


@dataclass(frozen=True)
class Group:
    """An open incident: its id, group labels and whether someone acknowledged it."""

    id: int
    labels: dict[str, str] = field(default_factory=lambda: {"cluster": "prod", "rule": RULE})
    acked: bool = False


def _labels(rule: str = RULE, cluster: str = "prod", **more: str) -> dict[str, str]:
    return {"cluster": cluster, "rule": rule, "severity": "critical", "group_id": "g", "topic": "t",
            "partition": "0", **more}  # fmt: skip


@pytest.fixture
def conn(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as connection:
        connection.execute(text("TRUNCATE alerts, alert_groups, acks"))
        connection.commit()
        yield connection
        connection.rollback()


def _alert(conn: Connection, n: int, labels: dict[str, str], **overrides: Any) -> None:
    values: dict[str, Any] = {
        "fingerprint": f"fp-{n}", "rule": labels.get("rule", RULE), "cluster": labels.get("cluster", "prod"),
        "entity": "group_partition", "entity_key": f"prod/g/t/{n}", "labels": json.dumps(labels),
        "severity": "critical", "state": "firing", "summary": f"alert {n}", "description": "",
        "pending_since": T0, "starts_at": T0, "updated_at": T0, "silenced_by": None, "inhibited_by": None,
    }  # fmt: skip
    values.update(overrides)
    columns = ", ".join(values)
    marks = ", ".join(f"CAST(:{c} AS jsonb)" if c == "labels" else f":{c}" for c in values)
    conn.execute(text(f"INSERT INTO alerts ({columns}) VALUES ({marks})"), values)


def _group(conn: Connection, group: Group) -> None:
    conn.execute(
        text(
            "INSERT INTO alert_groups (id, receiver, group_key, group_labels, route_path, dedup_key, ack_token,"
            " severity, created_at, notified, acknowledged_at, acknowledged_by)"
            " VALUES (:id, 'oncall', :key, CAST(:labels AS jsonb), 'root', :key, :key, 'critical', :t0,"
            " '{}'::jsonb, :acked_at, :acked_by)"
        ),
        {
            "id": group.id,
            "key": f"k{group.id}",
            "labels": json.dumps(group.labels),
            "t0": T0,
            "acked_at": T0 if group.acked else None,
            "acked_by": "alice" if group.acked else None,
        },
    )


# fmt: off
SECTION_CASES = [
    # (n, the alert's labels, its columns, the open incidents, expected section, linked incident ids)
    (1, _labels(), {}, [Group(10)], "firing", [10]),
    (2, _labels(), {}, [Group(10, acked=True), Group(11)], "acknowledged", [10, 11]),
    (3, _labels(), {"state": "pending", "starts_at": None}, [Group(10)], "pending", []),
    (4, _labels(), {"silenced_by": 7}, [Group(10)], "silenced", []),
    (5, _labels(), {"inhibited_by": "fp-BrokerDown"}, [Group(10)], "silenced", []),
    (6, _labels(), {}, [Group(10, {"cluster": "prod", "rule": "DataLossOccurred"})], "firing", []),
    (7, _labels(cluster="dev"), {}, [Group(10)], "firing", []),
    (8, _labels(), {}, [Group(10, {}, acked=True)], "acknowledged", [10]),
    (9, _labels(), {}, [Group(10, {"cluster": "prod", "rule": RULE, "team": "payments"}, acked=True)],
     "firing", []),
    (10, _labels(team="payments"), {},
     [Group(10, {"cluster": "prod", "team": "payments"}), Group(11, {"rule": RULE, "group_id": "g"}, acked=True),
      Group(12, {"rule": RULE, "group_id": "h"}, acked=True)],
     "acknowledged", [10, 11]),
    (11, _labels(), {"state": "pending", "starts_at": None, "silenced_by": 7}, [Group(10, acked=True)],
     "silenced", []),
]
# fmt: on


@pytest.mark.parametrize(("n", "labels", "columns", "groups", "section", "linked"), SECTION_CASES)
def test_an_alert_s_section_and_incidents(
    conn: Connection,
    n: int,
    labels: dict[str, str],
    columns: dict[str, Any],
    groups: list[Group],
    section: str,
    linked: list[int],
) -> None:
    _alert(conn, 1, labels, **columns)
    for group in groups:
        _group(conn, group)
    state = read_alerts(conn, rows=10, incident_rows=10)
    shown = [(name, a) for name in SECTIONS for a in state.sections[name]]
    assert len(shown) == 1, f"case {n}"
    (where, alert), = shown  # fmt: skip
    assert (where, alert.section, [i.id for i in alert.incidents]) == (section, section, linked), f"case {n}"
    assert state.counts == {name: int(name == section) for name in SECTIONS}, f"case {n}"


def _fill(conn: Connection, alerts: int) -> list[tuple[int, str, datetime]]:
    """`alerts` open alerts of mixed severities and ages, a third pending; (n, severity, since) each."""
    made = []
    for n in range(alerts):
        severity = ("info", "warning", "critical")[n % 3]
        since = T0 - timedelta(minutes=(n * 7) % 50)
        pending = n % 3 == 1
        _alert(conn, n, _labels(partition=str(n)), severity=severity, pending_since=since,
               starts_at=None if pending else since, state="pending" if pending else "firing")  # fmt: skip
        made.append((n, severity, since))
    return made


def test_each_section_is_counted_and_paged_worst_first_then_oldest(conn: Connection) -> None:
    made = _fill(conn, 60)
    firing = [(n, s, t) for n, s, t in made if n % 3 != 1]
    expected = [f"fp-{n}" for n, s, t in sorted(firing, key=lambda m: (-SEVERITY_RANK[m[1]], m[2], m[0]))]
    first = read_alerts(conn, rows=15, incident_rows=5)
    assert first.counts == {"firing": 40, "pending": 20, "acknowledged": 0, "silenced": 0}
    assert [a.fingerprint for a in first.sections["firing"]] == expected[:15]
    assert len(first.sections["pending"]) == 15
    second = read_alerts(conn, rows=15, incident_rows=5, section="firing", offset=15)
    assert [a.fingerprint for a in second.sections["firing"]] == expected[15:30]
    assert [a.fingerprint for a in second.sections["pending"]] == [
        a.fingerprint for a in first.sections["pending"]
    ], "the other sections stay on their first page"
    past = read_alerts(conn, rows=15, incident_rows=5, section="firing", offset=45)
    assert past.sections["firing"] == [] and past.counts["firing"] == 40


def test_a_search_counts_only_what_matches_taken_literally(conn: Connection) -> None:
    _fill(conn, 12)
    found = read_alerts(conn, "prod/g/t/1", rows=50, incident_rows=5)
    assert sorted(a.entity_key for name in SECTIONS for a in found.sections[name]) == [
        "prod/g/t/1", "prod/g/t/10", "prod/g/t/11"
    ]  # fmt: skip
    assert sum(found.counts.values()) == 3
    assert sum(read_alerts(conn, "prod/g/t/_", rows=50, incident_rows=5).counts.values()) == 0


def test_the_first_incidents_unacknowledged_first_and_their_count(conn: Connection) -> None:
    for n in range(1, 8):
        _group(conn, Group(n, {"cluster": "prod", "group_id": f"g{n}"}, acked=n % 2 == 0))
    state = read_alerts(conn, rows=5, incident_rows=4)
    assert [i.id for i in state.incidents] == [1, 3, 5, 7] and state.incident_count == 7
    assert [i.id for i in read_alerts(conn, rows=5, incident_rows=6).incidents] == [1, 3, 5, 7, 2, 4]


def test_bad_page_sizes_are_refused(conn: Connection) -> None:
    with pytest.raises(ValueError, match="rows and incident_rows must be positive"):
        read_alerts(conn, rows=0, incident_rows=5)

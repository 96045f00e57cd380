"""What the alerts page offers for an alert, and when the collection page calls a job stale:
numbered cases, each with the verdict it expects. (Which section an alert is in and which
incidents it is part of is decided in SQL: tests/integration/test_alerts_page_read.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.collect.jobs import job_intervals
from monitor.core.scheduler import run_intervals
from monitor.core.settings import AlertConfig, Intervals
from monitor.expose.read.alerts import AlertItem
from monitor.expose.read.collection import JobHealth, job_health
from monitor.expose.web.context import template_environment
from monitor.expose.web.pages.alerts import _read_flash

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)


def alert(rule: str = "TimeUntilDataLoss", **overrides: Any) -> AlertItem:
    values: dict[str, Any] = {
        "id": 1, "fingerprint": "fp-" + rule, "rule": rule, "cluster": "prod", "entity": "group_partition",
        "entity_key": "prod/g/t/0", "severity": "critical", "state": "firing", "summary": "s", "annotations": {},
        "labels": {"cluster": "prod", "rule": rule, "severity": "critical", "group_id": "g", "topic": "t",
                   "partition": "0", "page": "true"},
        "pending_since": T0, "starts_at": T0, "silenced_by": None, "inhibited_by": None, "section": "firing",
    }  # fmt: skip
    values.update(overrides)
    return AlertItem(**values)


def test_a_silence_from_an_alert_matches_it_whatever_its_severity() -> None:
    item = alert()
    assert item.silence_matchers == [
        "cluster=prod", "group_id=g", "page=true", "partition=0", "rule=TimeUntilDataLoss", "topic=t"
    ]  # fmt: skip
    assert item.entity_labels == [("group_id", "g"), ("partition", "0"), ("topic", "t")]


INTERVALS = run_intervals(Intervals(), AlertConfig(), collect=job_intervals())


def run(job: str, status: str = "ok", cluster: str | None = "prod") -> dict[str, Any]:
    return {"cluster": cluster, "job": job, "status": status, "started_at": T0}


STALE_CASES = [
    # (n, job, seconds since the newest success (None: never), expected stale)
    (1, "offsets", 10, False),
    (2, "offsets", 45, False),  # three 15 s intervals
    (3, "offsets", 46, True),
    (4, "metadata", 170, False),
    (5, "log_dirs", 400, True),
    (6, "configs", None, True),
    (7, "start", None, False),  # a one-off run has no interval
]


@pytest.mark.parametrize(("n", "job", "age", "stale"), STALE_CASES)
def test_a_job_is_stale_after_three_intervals_without_success(
    n: int, job: str, age: int | None, stale: bool
) -> None:
    success = {} if age is None else {("prod", job): T0}
    (health,) = job_health([run(job)], success, INTERVALS, T0 + timedelta(seconds=age or 0))
    assert health.stale is stale, f"case {n}"
    assert health.age_seconds == (None if age is None else age)


def test_jobs_are_listed_per_cluster_with_the_clusterless_jobs_last() -> None:
    rows = job_health([run("evaluate", cluster=None), run("offsets"), run("metadata")], {}, INTERVALS, T0)
    assert [(r.cluster, r.job) for r in rows] == [
        ("prod", "metadata"),
        ("prod", "offsets"),
        (None, "evaluate"),
    ]


def test_a_forged_flash_cookie_is_ignored() -> None:
    assert _read_flash("%7B%22kind%22%3A%20%22ok%22%2C%20%22text%22%3A%20%22done%22%7D") == {
        "kind": "ok", "text": "done"
    }  # fmt: skip
    assert _read_flash("not json") is None
    assert _read_flash('{"kind": "script"}') is None


@pytest.mark.parametrize(
    ("counts", "shown"),
    [
        ({"filling": 1200, "groups": 3}, "filling: 1,200 append times still to read"),
        ({"filling": 0}, None),
        (None, None),
    ],
)
def test_the_collection_page_says_which_offsets_runs_are_still_filling(
    counts: dict[str, int] | None, shown: str | None
) -> None:
    last = {"status": "ok", "started_at": T0, "duration_ms": 900, "counts": counts, "error": None}
    job = JobHealth("prod", "offsets", last, T0, 15.0, 1.0)
    html = template_environment().get_template("web/collection.html").render(
        clusters={"prod": [job]}, stale=[], failures=[], as_of=T0, now=T0, stale_intervals=3, kafka={},
        title="Collection health", inbox_nav=False, generated_at="",
    )  # fmt: skip
    filling = [line for line in html.splitlines() if 'data-role="filling"' in line]
    if shown is None:
        assert filling == []
    else:
        assert len(filling) == 1 and shown in filling[0]


@pytest.mark.parametrize(
    ("counts", "shown"),
    [
        ({"incremental": 1, "carried_groups": 4950, "rows_group": 50}, "incremental: 4,950 groups carried"),
        ({"incremental": 1, "carried_groups": 1}, "incremental: 1 group carried"),
        ({"full": 1, "rows_group": 5000}, "full"),
        ({"rules": 12}, None),
    ],
)
def test_the_collection_page_says_which_kind_each_evaluation_was(
    counts: dict[str, int], shown: str | None
) -> None:
    last = {"status": "ok", "started_at": T0, "duration_ms": 900, "counts": counts, "error": None}
    job = JobHealth(None, "evaluate", last, T0, 30.0, 1.0)
    html = template_environment().get_template("web/collection.html").render(
        clusters={None: [job]}, stale=[], failures=[], as_of=T0, now=T0, stale_intervals=3, kafka={},
        title="Collection health", inbox_nav=False, generated_at="",
    )  # fmt: skip
    kinds = [line for line in html.splitlines() if 'data-role="evaluation-kind"' in line]
    if shown is None:
        assert kinds == []
    else:
        assert len(kinds) == 1 and f">{shown}</span>" in kinds[0]

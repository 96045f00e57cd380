"""The retention guardrails as numbered tables: every case records the verdict of every rule, not
only the final one, so a change in one rule shows where it changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from monitor.act.guardrails import (
    RaiseAsk,
    TopicFacts,
    evaluate,
    project_disk,
)
from monitor.act.policy import Policy, load_policy
from tests.fixtures.retention_requests import GiB, facts

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS

POLICY_YAML = """
limits: {max_retention_ms: 30d, max_retention_bytes: 1TiB, max_multiple: 10, max_duration: 14d}
instant: {max_retention_ms: 7d, max_retention_bytes: 100GiB, max_multiple: 3, max_duration: 2d}
disk_usage_ceiling: 0.8
reviewers: [kafka-platform]
"""


@pytest.fixture(scope="module")
def policy(tmp_path_factory: pytest.TempPathFactory) -> Policy:
    path = tmp_path_factory.mktemp("policy") / "retention-policy.yaml"
    path.write_text(POLICY_YAML)
    return load_policy(path)


def ask(new: dict[str, int], duration: int = DAY_MS, teams: tuple[str, ...] = ("payments",)) -> RaiseAsk:
    return RaiseAsk("alice", frozenset(teams), new, duration)


RULES = (
    "owner_team",
    "managed_configs",
    "higher_than_current",
    "max_value",
    "max_multiple",
    "max_duration",
    "disk_headroom",
    "one_open_request",
)
OK = "ok"

# (number, facts, ask, {rule: "fail" | "review"} for the rules that do not simply pass, tier or None)
CASES = [
    (1, facts(), ask({"retention.ms": 2 * DAY_MS}), {}, "instant"),
    (2, facts(), ask({"retention.ms": 2 * DAY_MS}, teams=("search",)), {"owner_team": "fail"}, None),
    (3, facts(owner=None), ask({"retention.ms": 2 * DAY_MS}), {"owner_team": "fail"}, None),
    (4, facts(), ask({"retention.ms": DAY_MS // 2}), {"higher_than_current": "fail"}, None),
    (5, facts(), ask({"retention.ms": DAY_MS}), {"higher_than_current": "fail"}, None),
    (
        6,
        facts(ms=-1),
        ask({"retention.ms": 2 * DAY_MS}),
        {"higher_than_current": "fail"},
        None,
    ),
    (7, facts(), ask({"retention.ms": 365 * DAY_MS}), {"max_value": "fail", "max_multiple": "fail"}, None),
    (8, facts(), ask({"retention.ms": 5 * DAY_MS}), {"max_multiple": "review"}, "reviewed"),
    (9, facts(), ask({"retention.ms": 12 * DAY_MS}), {"max_value": "review", "max_multiple": "fail"}, None),
    (10, facts(ms=3 * DAY_MS), ask({"retention.ms": 8 * DAY_MS}), {"max_value": "review"}, "reviewed"),
    (
        11,
        facts(),
        ask({"retention.ms": 2 * DAY_MS}, duration=3 * DAY_MS),
        {"max_duration": "review"},
        "reviewed",
    ),
    (12, facts(), ask({"retention.ms": 2 * DAY_MS}, duration=15 * DAY_MS), {"max_duration": "fail"}, None),
    (13, facts(), ask({"retention.ms": 2 * DAY_MS}, duration=0), {"max_duration": "fail"}, None),
    (14, facts(rate=None), ask({"retention.ms": 2 * DAY_MS}), {"disk_headroom": "review"}, "reviewed"),
    # 1 MB/s more for 2 days = ~161 GiB per replica, 2 partitions per broker = ~322 GiB: 79% of 1000 GiB.
    (15, facts(rate=1_000_000, used=470 * GiB), ask({"retention.ms": 3 * DAY_MS}), {}, "instant"),
    (
        16,
        facts(rate=1_000_000, used=480 * GiB),
        ask({"retention.ms": 3 * DAY_MS}),
        {"disk_headroom": "fail"},
        None,
    ),
    (17, facts(open_request=41), ask({"retention.ms": 2 * DAY_MS}), {"one_open_request": "fail"}, None),
    (18, facts(size=10 * GiB), ask({"retention.bytes": 20 * GiB}), {}, "instant"),
    (19, facts(size=10 * GiB), ask({"retention.bytes": 5 * GiB}), {"higher_than_current": "fail"}, None),
    (20, facts(), ask({"retention.bytes": 20 * GiB}), {"higher_than_current": "fail"}, None),
    (
        21,
        facts(size=100 * GiB),
        ask({"retention.bytes": 2000 * GiB}),
        {"max_value": "fail", "max_multiple": "fail"},
        None,
    ),
    (22, facts(), ask({}), {"managed_configs": "fail"}, None),
    (23, facts(), ask({"cleanup.policy": 1}), {"managed_configs": "fail"}, None),
    (24, facts(size=10 * GiB), ask({"retention.ms": 2 * DAY_MS, "retention.bytes": 20 * GiB}), {}, "instant"),
    # 200 GiB more per partition, two partitions per broker: 480 + 400 of 1000 GiB = 88%.
    (
        25,
        facts(size=100 * GiB, rate=None, used=480 * GiB),
        ask({"retention.bytes": 300 * GiB}),
        {"max_value": "review", "disk_headroom": "fail"},
        None,
    ),
]


@pytest.mark.parametrize(
    ("number", "topic", "request_", "expected", "tier"), CASES, ids=[f"case{c[0]}" for c in CASES]
)
def test_guardrail_table(
    policy: Policy,
    number: int,
    topic: TopicFacts,
    request_: RaiseAsk,
    expected: dict[str, str],
    tier: str | None,
) -> None:
    verdict = evaluate(policy, topic, request_)
    seen = {c.rule: ("fail" if not c.ok else OK if c.instant else "review") for c in verdict.checks}
    assert tuple(seen) == RULES
    assert seen == {rule: expected.get(rule, OK) for rule in RULES}, verdict.checks
    assert verdict.ok == (tier is not None)
    if tier is not None:
        assert verdict.tier == tier


def test_disk_refusal_names_the_broker_and_the_numbers(policy: Policy) -> None:
    verdict = evaluate(policy, facts(rate=1_000_000, used=480 * GiB), ask({"retention.ms": 3 * DAY_MS}))
    (refusal,) = verdict.refusals
    assert refusal.rule == "disk_headroom"
    assert "broker 1: 480.0 GiB used + 321.9 GiB for this raise of 1000.0 GiB = 80.2%" in refusal.message
    assert "ceiling of 80%" in refusal.message


def test_refusals_name_rule_and_numbers(policy: Policy) -> None:
    text = evaluate(policy, facts(), ask({"retention.ms": 12 * DAY_MS})).refusal_text()
    assert text.startswith(
        "max_multiple: retention.ms 12 d is 12.0 x the current 1 d, above the policy's 10 x"
    )
    other_team = evaluate(policy, facts(), ask({"retention.ms": 2 * DAY_MS}, teams=("search",)))
    assert "belongs to team 'payments'" in other_team.refusal_text()
    lower = evaluate(policy, facts(), ask({"retention.ms": HOUR_MS})).refusal_text()
    assert "retention.ms 1 h is not higher than the current 1 d" in lower


def test_size_cap_bounds_a_time_raise() -> None:
    # 1 MB/s for 1 day would keep ~86 GB, but retention.bytes caps each partition at 10 GiB: nothing grows.
    projection = project_disk(facts(size=10 * GiB, rate=1_000_000), {"retention.ms": 2 * DAY_MS})
    assert projection.extra_bytes == 0
    assert not projection.unknown


def test_bytes_raise_without_a_rate_is_bounded_by_the_new_size() -> None:
    projection = project_disk(facts(size=10 * GiB, rate=None), {"retention.bytes": 12 * GiB})
    assert [b.extra_bytes for b in projection.brokers] == [4 * GiB] * 3
    assert not projection.unknown


def test_missing_broker_disk_is_unknown_cost(policy: Policy) -> None:
    topic = facts()
    topic = TopicFacts(
        topic.cluster, topic.topic, topic.owner, topic.current, topic.partitions, {1: topic.brokers[1]}
    )
    verdict = evaluate(policy, topic, ask({"retention.ms": 2 * DAY_MS}))
    assert verdict.ok and verdict.tier == "reviewed"
    assert "no disk size collected for broker 2" in verdict.checks[6].message


def test_unknown_cost_refused_when_the_policy_says_so(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(POLICY_YAML + "unknown_disk_cost: refuse\n")
    verdict = evaluate(load_policy(path), facts(rate=None), ask({"retention.ms": 2 * DAY_MS}))
    assert [c.rule for c in verdict.refusals] == ["disk_headroom"]

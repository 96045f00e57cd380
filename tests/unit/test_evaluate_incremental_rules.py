"""Which rules let an evaluation carry the groups that stood still (monitor.evaluate.incremental):
none that decides on a group's column moving with the clock alone."""

from __future__ import annotations

from monitor.evaluate.incremental import carries
from monitor.evaluate.rules import Rule
from tests.fixtures.rules import default_ruleset

NO_COMMIT = Rule.model_validate({
    "name": "NoCommit", "description": "no commit for an hour", "entity": "group_partition",
    "condition": "time_since_last_commit_seconds > 3600", "value": "time_since_last_commit_seconds",
    "severities": [{"severity": "info"}], "summary": "{{ group_id }} commits no more",
})  # fmt: skip


def test_the_shipped_rules_let_an_evaluation_carry_groups() -> None:
    assert carries(default_ruleset().rules)


def test_a_rule_deciding_on_the_time_since_the_last_commit_makes_every_evaluation_full() -> None:
    assert not carries([*default_ruleset().rules, NO_COMMIT])
    tiered = NO_COMMIT.model_copy(update={"condition": "offset_lag >= 0", "severities": NO_COMMIT.severities})
    assert carries([tiered]), "reported (its value), not decided on: carried"


def test_a_rule_of_another_entity_reading_the_clock_does_not_matter() -> None:
    assert carries([NO_COMMIT.model_copy(update={"entity": "partition", "condition": "leader > 0"})])

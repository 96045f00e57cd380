"""The shipped rules' texts render for a fleet's real sizes: an offset lag of millions of
messages is a value the consumer advice reads, not a width the template bound refuses."""

from __future__ import annotations

import logging

import pytest

from monitor.evaluate.engine import render
from monitor.evaluate.rules import sample_context
from tests.fixtures.rules import default_ruleset

LARGE = {"offset_lag": 25_737_330, "max_offset_lag": 900_000, "consumers_needed": 70_000, "members": 3}


@pytest.mark.parametrize("rule", [r for r in default_ruleset().rules if r.entity in ("group", "group_topic")],
                         ids=lambda r: r.name)  # fmt: skip
def test_a_group_rule_renders_with_millions_of_unread_messages(
    rule: object, caplog: pytest.LogCaptureFixture
) -> None:
    from monitor.evaluate.rules import Rule

    assert isinstance(rule, Rule)
    row = {
        **sample_context(rule.entity),
        **{k: v for k, v in LARGE.items() if k in sample_context(rule.entity)},
    }
    row.update(entity_key=f"prod/{row.get('group_id')}", value=float(row["offset_lag"]))
    with caplog.at_level(logging.WARNING):
        summary, _ = render(row, rule)
    assert not [r for r in caplog.records if "template failed" in r.getMessage()], rule.name
    assert not summary.startswith(f"{rule.name} on "), summary

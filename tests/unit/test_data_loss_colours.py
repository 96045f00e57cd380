"""The dashboard colours the data-loss margin by TimeUntilDataLoss's own tiers, read from the rule
files the evaluation uses: the page and the pager agree, and an edited threshold moves both."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest

from monitor.devtools.paths import project_root
from monitor.evaluate.rule_sql import upper_bound
from monitor.evaluate.rules import Rule
from monitor.expose.web.health import BAD, OK, WARN, LossScale, RuleScale, group, loss_scale
from tests.fixtures.rules import default_ruleset


@pytest.mark.parametrize(
    ("when", "bound"),
    [
        ("data_loss_margin_seconds < 1800", 1800.0),
        ("(data_loss_margin_seconds < 1800)", 1800.0),
        ("21600 > data_loss_margin_seconds", 21600.0),
        ("data_loss_margin_seconds < -60", -60.0),
        ("data_loss_margin_seconds <= 600", math.nextafter(600.0, math.inf)),
        ("data_loss_margin_seconds < 1800 AND offset_lag > 100", None),
        ("time_until_data_loss_seconds < 1800", None),
        ("data_loss_margin_seconds > 1800", None),
        (None, None),
    ],
)
def test_the_bound_of_a_tier(when: str | None, bound: float | None) -> None:
    assert upper_bound(when, "data_loss_margin_seconds") == bound


def test_the_shipped_rule_pack_pages_under_30_minutes_and_warns_under_6_hours() -> None:
    scale = loss_scale(default_ruleset().rules)
    assert scale == LossScale(1800.0, 21600.0)
    assert [scale.health(m) for m in (None, -5.0, 1799.0, 1800.0, 21599.0, 21600.0)] == [
        OK, BAD, BAD, WARN, WARN, OK,
    ]  # fmt: skip
    assert scale.health(None, occurred=True) == BAD


def test_a_group_that_keeps_up_on_short_retention_is_green() -> None:
    # Its oldest unread message is deleted in 50 s, but it reads it first: no margin, no page.
    scale = LossScale(1800.0, 21600.0)
    keeps_up = {"status": "OK", "max_lag_seconds": 2.0, "time_until_data_loss_seconds": 50.0,
                "data_loss_margin_seconds": None, "data_loss_occurred": False}  # fmt: skip
    stopped = {**keeps_up, "status": "OK", "data_loss_margin_seconds": 50.0}
    assert (group(keeps_up, scale), group(stopped, scale)) == (OK, BAD)


def test_a_tier_the_page_cannot_read_colours_nothing() -> None:
    rule = Rule.model_validate({
        "name": "TimeUntilDataLoss", "description": "d", "entity": "group_partition",
        "value": "data_loss_margin_seconds", "summary": "s",
        "severities": [{"severity": "critical", "when": "data_loss_margin_seconds < 60 AND offset_lag > 10"},
                       {"severity": "warning"}],
    })  # fmt: skip
    scale = loss_scale([rule])
    assert scale == LossScale(None, math.inf)
    assert (scale.health(30.0), scale.health(None)) == (WARN, OK)
    assert loss_scale([]) == LossScale(), "no rule, no colour"


def test_the_scale_follows_an_edited_rule_file(tmp_path: Path) -> None:
    shutil.copy(project_root() / "alert_rules" / "retention.yaml", tmp_path / "retention.yaml")
    scale = RuleScale(tmp_path)
    assert scale() == LossScale(1800.0, 21600.0)
    path = tmp_path / "retention.yaml"
    text = path.read_text().replace("data_loss_margin_seconds < 1800", "data_loss_margin_seconds < 600")
    path.write_text(text)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a coarse clock still sees it
    assert scale() == LossScale(600.0, 21600.0)

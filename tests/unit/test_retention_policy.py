"""The retention policy file: strict, with the file, the line and the fix in every error."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.act.policy import default_policy_path, load_policy, parse_duration_ms, parse_size
from monitor.cli.main import app
from monitor.core.errors import ConfigError

GOOD = """\
limits: {max_retention_ms: 30d, max_retention_bytes: 1TiB, max_multiple: 10, max_duration: 14d}
instant: {max_retention_ms: 7d, max_retention_bytes: 100GiB, max_multiple: 3, max_duration: 2d}
disk_usage_ceiling: 0.8
reviewers: [kafka-platform]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "retention-policy.yaml"
    path.write_text(text)
    return path


def test_the_project_policy_loads() -> None:
    policy = load_policy(default_policy_path())
    assert policy.reviewers == ("kafka-platform",)
    assert policy.instant.max_multiple <= policy.limits.max_multiple


def test_values_are_parsed(tmp_path: Path) -> None:
    policy = load_policy(_write(tmp_path, GOOD))
    assert policy.limits.max_retention_ms == 30 * 86_400_000
    assert policy.instant.max_retention_bytes == 100 * 2**30
    assert policy.instant.max_duration_ms == 2 * 86_400_000
    assert policy.notify_before_expiry_ms == 3_600_000
    assert policy.unknown_disk_cost == "review"


@pytest.mark.parametrize(
    ("number", "text", "expected"),
    [
        (1, GOOD + "colour: red\n", "line 5: colour: unknown key under the top level"),
        (
            2,
            GOOD.replace("max_duration: 14d", "max_duration: 2 weeks"),
            "line 1: limits.max_duration: bad duration",
        ),
        (3, GOOD.replace("1TiB", "lots"), "line 1: limits.max_retention_bytes: bad size 'lots'"),
        (4, GOOD.replace("0.8", "80"), "line 3: disk_usage_ceiling: Input should be less than 1"),
        (
            5,
            GOOD.replace("max_multiple: 3", "max_multiple: 20"),
            "instant.max_multiple (20) is above limits.max_multiple (10)",
        ),
        (
            6,
            GOOD.replace("reviewers: [kafka-platform]", "reviewers: []"),
            "line 4: reviewers: List should have at least 1 item",
        ),
        (
            7,
            GOOD.replace("disk_usage_ceiling: 0.8\n", ""),
            "disk_usage_ceiling: required key is missing; add it",
        ),
        (
            8,
            GOOD + "unknown_disk_cost: guess\n",
            "line 5: unknown_disk_cost: Input should be 'review' or 'refuse'",
        ),
    ],
)
def test_problems_name_the_line_and_fix(tmp_path: Path, number: int, text: str, expected: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_policy(path)
    assert str(path) in str(caught.value)
    assert any(expected in problem for problem in caught.value.problems), caught.value.problems


def test_units() -> None:
    assert parse_duration_ms("1d12h") == 36 * 3_600_000
    assert parse_size("10GB") == 10**10
    assert parse_size(1024) == 1024
    with pytest.raises(ValueError, match=r"e\.g\. 30m"):
        parse_duration_ms("0s")


def test_policy_check_command(tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(app, ["retention", "policy", "check", str(_write(tmp_path, GOOD))])
    assert good.exit_code == 0, good.output
    assert "OK" in good.output
    bad = runner.invoke(app, ["retention", "policy", "check", str(_write(tmp_path, GOOD + "x: 1\n"))])
    assert bad.exit_code == 2
    assert "line 5: x: unknown key" in bad.output

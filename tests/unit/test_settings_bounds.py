"""Settings that parse but cannot be meant: an interval of 1e-300 s or of centuries, an infinite
or not-a-number value (from the file or the environment) are refused with the key path, the line
and the fix; a `trusted_proxies` that trusts every address is warned about by `config check` and
in the daemon's log at start."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.app import build_app
from monitor.cli.main import app
from monitor.core.errors import ConfigError
from monitor.core.settings import load_settings

runner = CliRunner()

# (id, the YAML, what the one problem says)
ABSURD: list[tuple[str, str, str]] = [
    (
        "1e-300 seconds",
        "intervals:\n  offsets_seconds: 1.0e-300\n",
        "line 2: intervals.offsets_seconds: 1e-300 s is shorter than a millisecond; write at least 0.001",
    ),
    (
        "a century",
        "alert:\n  retry_max_seconds: 3153600000\n",
        "line 2: alert.retry_max_seconds: 3.1536e+09 s is longer than 3650d (ten years); write less",
    ),
    (
        "a tiny timeout",
        "collect:\n  timestamp_budget_seconds: 0.0000001\n",
        "line 2: collect.timestamp_budget_seconds: 1e-07 s is shorter than a millisecond; write at least 0.001",
    ),
    (
        "inf as text",
        "evaluate:\n  window_seconds: inf\n",
        "line 2: evaluate.window_seconds: must be a finite number, not inf or nan; write e.g. 30",
    ),
    (
        "nan as text",
        "retention:\n  verify_seconds: nan\n",
        "line 2: retention.verify_seconds: must be a finite number, not inf or nan; write e.g. 30",
    ),
    (
        "yaml .inf",
        "intervals:\n  probe_seconds: .inf\n",
        "line 2, column 18: .inf is not a number a setting can take; write a finite number",
    ),
]


@pytest.mark.parametrize(("text", "expected"), [(t, e) for _, t, e in ABSURD], ids=[i for i, *_ in ABSURD])
def test_absurd_seconds_are_refused_with_the_key_path_and_line(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert caught.value.problems == [expected]
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {path}: {expected}"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("KAFKA_HEALTH_INTERVALS__OFFSETS_SECONDS", "1e-300"), ("KAFKA_HEALTH_ALERT__INTERVAL_SECONDS", "inf")],
)
def test_the_environment_is_held_to_the_same_bounds(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError, match=r"shorter than a millisecond|finite number"):
        load_settings(None)


def test_ordinary_and_zero_seconds_still_load(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text("intervals:\n  offsets_seconds: 0.5\ncollect:\n  probe:\n    retire_after_seconds: 0\n")
    settings = load_settings(path)
    assert settings.intervals.offsets_seconds == 0.5
    assert settings.collect.probe.retire_after_seconds == 0


EVERY_ADDRESS = "web:\n  identity:\n    trusted_proxies: ['10.0.0.5', '0.0.0.0/0', '::/0', '10.0.0.0/8']\n"


def test_config_check_warns_of_proxies_that_trust_every_address(tmp_path: Path) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(EVERY_ADDRESS)
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: {path}: web.identity.trusted_proxies: {network!r} trusts every address: anyone who "
        "reaches the port can act as any user and team by sending the identity headers; list only "
        "your reverse proxies' addresses"
        for network in ("0.0.0.0/0", "::/0")
    ]


def test_the_daemon_logs_the_warning_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "monitor.yaml"
    path.write_text(EVERY_ADDRESS)
    with caplog.at_level(logging.WARNING, logger="monitor.app"):
        build_app(load_settings(path), "postgresql+psycopg://nobody@127.0.0.1:9/none")
    logged = [r.getMessage() for r in caplog.records if "trusts every address" in r.getMessage()]
    assert [message.split(":")[1].strip() for message in logged] == ["web.identity.trusted_proxies"] * 2
    assert "'0.0.0.0/0' trusts every address" in logged[0] and "'::/0' trusts every address" in logged[1]


def test_no_warning_for_a_proxy_network() -> None:
    assert load_settings(None).warnings() == []

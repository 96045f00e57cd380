"""Settings: strict validation with key paths and lines, environment overrides, secrets hidden."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.cli.main import app
from monitor.core.errors import ConfigError
from monitor.core.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "monitor.yaml"
    path.write_text(text)
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    return caught.value.problems


def test_defaults_are_the_embedded_stack() -> None:
    settings = Settings()
    assert [c.name for c in settings.clusters] == ["local"]
    assert settings.clusters[0].bootstrap_servers == ["127.0.0.1:19092"]
    assert settings.database.url is None
    assert settings.spark.master == "local[*]"


def test_example_file_is_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH_CLUSTERS__0__SECURITY__SASL_PASSWORD", "pw")
    settings = load_settings(ROOT / "monitor.example.yaml")
    assert [c.name for c in settings.clusters] == ["prod-eu", "local"]
    prod = settings.cluster("prod-eu")
    assert prod.topics.accepts("orders") and not prod.topics.accepts("_schemas")
    assert not prod.topics.accepts("app-store-changelog")
    assert not prod.groups.accepts("console-consumer-1234") and prod.groups.accepts("billing")


def test_unknown_key_named_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "clusters:\n  - name: a\n    bootstrap_servers: ['h:9092']\n    colour: red\nspark:\n  mastr: x\n",
    )
    problems = problems_of(path)
    assert any("clusters.0.colour" in p and "line 4" in p and "unknown key" in p for p in problems)
    assert any("spark.mastr" in p and "line 6" in p for p in problems)


def test_bad_regex_named(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "clusters:\n  - name: a\n    bootstrap_servers: ['h:9092']\n    groups:\n      deny: ['ok', '[oops']\n",
    )
    (problem,) = problems_of(path)
    assert "clusters.0.groups.deny" in problem
    assert "[oops" in problem and "line 5" in problem


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("clusters:\n  - name: a\n    bootstrap_servers: ['nohost']\n", "must be host:port"),
        ("clusters:\n  - name: 'bad name'\n    bootstrap_servers: ['h:1']\n", "cluster name"),
        (
            "clusters:\n  - {name: a, bootstrap_servers: ['h:1']}\n  - {name: a, bootstrap_servers: ['h:2']}\n",
            "used twice",
        ),
        (
            "clusters:\n  - name: a\n    bootstrap_servers: ['h:1']\n    security: {protocol: SASL_SSL, sasl_mechanism: PLAIN}\n",
            "needs sasl_username, sasl_password",
        ),
        (
            "clusters:\n  - name: a\n    bootstrap_servers: ['h:1']\n    security: {sasl_mechanism: PLAIN}\n",
            "use protocol SASL",
        ),
        ("database: {url: 'mysql://x'}\n", "must be a PostgreSQL URL"),
        ("spark: {driver_memory: lots}\n", "spark.driver_memory"),
        ("clusters: []\nlog_level: LOUD\n", "log_level"),
        (
            "clusters:\n  - name: a\n    bootstrap_servers: ['h:1']\n    client_config: {sasl.password: x}\n",
            "looks like a secret",
        ),
        ("just a string\n", "must hold a mapping"),
        ("a: 1\na: 2\n", "appears twice"),
        ("clusters: [\n", "not valid YAML"),
    ],
)
def test_bad_values_refused_with_the_fix(tmp_path: Path, body: str, expected: str) -> None:
    assert any(expected in p for p in problems_of(write(tmp_path, body)))


def test_environment_overrides_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "spark:\n  master: local[1]\n")
    monkeypatch.setenv("KAFKA_HEALTH_SPARK__MASTER", "spark://127.0.0.1:7077")
    monkeypatch.setenv("DATABASE_URL", "postgresql+psycopg://u:s3cret@db:5432/kh")
    settings = load_settings(path)
    assert settings.spark.master == "spark://127.0.0.1:7077"
    assert settings.database.url is not None
    assert settings.database.url.get_secret_value().endswith("@db:5432/kh")


@pytest.mark.parametrize(
    ("variable", "value", "refused"),
    [
        ("KAFKA_HEALTH_SLACK_TOKEN", "xoxb-1", None),  # the shipped routing's receivers name these
        ("KAFKA_HEALTH_PAGERDUTY_ROUTING_KEY", "R0UT1NG", None),
        ("KAFKA_HEALTH_LOG_LEVEL", "LOUD", "log_level"),  # a section or top-level key is a setting
        ("KAFKA_HEALTH_SPARK__MASTR", "local[1]", "spark.mastr: unknown key"),
        ("KAFKA_HEALTH_SPORK__MASTER", "local[1]", "spork: unknown key"),
    ],
)
def test_receiver_secrets_in_the_environment_are_not_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, value: str, refused: str | None
) -> None:
    monkeypatch.setenv(variable, value)
    path = write(tmp_path, "clusters:\n  - name: a\n    bootstrap_servers: ['h:1']\n")
    if refused is None:
        assert load_settings(path).clusters[0].name == "a"
    else:
        assert any(refused in p for p in problems_of(path))


def test_secrets_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH_CLUSTERS__0__SECURITY__SASL_PASSWORD", "hunter2-topsecret")
    path = write(
        tmp_path,
        "clusters:\n  - name: a\n    bootstrap_servers: ['h:1']\n    security:\n"
        "      protocol: SASL_SSL\n      sasl_mechanism: SCRAM-SHA-512\n      sasl_username: me\n"
        "      sasl_password: hunter2-topsecret\n",
    )
    settings = load_settings(path)
    assert settings.clusters[0].security.sasl_password is not None
    assert "hunter2" not in repr(settings) and "hunter2" not in str(settings.model_dump())
    result = runner.invoke(app, ["config", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "hunter2" not in result.output


def test_cli_config_check_rejects_unknown_key_and_bad_regex(tmp_path: Path) -> None:
    unknown = write(tmp_path, "clusters:\n  - name: a\n    bootstrap_servers: ['h:1']\n    bogus_key: 1\n")
    result = runner.invoke(app, ["config", "check", str(unknown)])
    assert result.exit_code == 2
    assert "clusters.0.bogus_key" in result.output and "unknown key" in result.output

    regex = tmp_path / "regex.yaml"
    regex.write_text("clusters:\n  - name: a\n    bootstrap_servers: ['h:1']\n    topics: {allow: ['(']}\n")
    result = runner.invoke(app, ["config", "check", str(regex)])
    assert result.exit_code == 2
    assert "clusters.0.topics.allow" in result.output and "invalid regular expression" in result.output


def test_example_file_needs_the_password_from_the_environment() -> None:
    problems = problems_of(ROOT / "monitor.example.yaml")
    assert any("clusters.0.security" in p and "sasl_password" in p and "line 9" in p for p in problems)


def test_environment_index_out_of_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH_CLUSTERS__3__NAME", "x")
    assert any(
        "KAFKA_HEALTH_CLUSTERS__3__NAME" in p and "does not exist" in p
        for p in problems_of(write(tmp_path, "{}\n"))
    )


def test_environment_json_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAFKA_HEALTH_CLUSTERS", '[{"name": "e", "bootstrap_servers": ["h:9"]}]')
    assert load_settings(write(tmp_path, "{}\n")).clusters[0].name == "e"


def test_cli_config_check_missing_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["config", "check", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "cannot read" in result.output


@pytest.mark.parametrize(
    ("database", "expected"),
    [
        (
            "  sample_retention_days: 10\n  rollup_15m_retention_days: 5\n",
            "line 1: database: rollup_15m_retention_days (5) is shorter than sample_retention_days (10): "
            "a coarser history must be kept at least as long as the finer one it summarises; "
            "raise rollup_15m_retention_days to 10 or more",
        ),
        (
            "  rollup_1h_retention_days: 20\n",
            "line 1: database: rollup_1h_retention_days (20) is shorter than rollup_15m_retention_days (30): "
            "a coarser history must be kept at least as long as the finer one it summarises; "
            "raise rollup_1h_retention_days to 30 or more",
        ),
    ],
)
def test_a_rollup_kept_shorter_than_what_it_summarises_is_refused(
    tmp_path: Path, database: str, expected: str
) -> None:
    assert problems_of(write(tmp_path, f"database:\n{database}")) == [expected]


def test_history_is_kept_7_days_raw_30_in_15_minutes_and_400_in_hours_by_default() -> None:
    database = Settings().database
    assert (database.sample_retention_days, database.rollup_15m_retention_days) == (7, 30)
    assert database.rollup_1h_retention_days == 400

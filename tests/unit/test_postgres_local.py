"""The local PostgreSQL helper and URL handling, without a server."""

from __future__ import annotations

import pwd
import socket
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from monitor.cli.main import app
from monitor.core.errors import DevEnvironmentError, StoreUnavailableError
from monitor.devtools import postgres
from monitor.devtools.postgres import LocalPostgres, find_binaries
from monitor.store.engine import mask_url, normalize_url


def test_url_points_at_the_superuser_on_loopback(tmp_path: Path) -> None:
    server = LocalPostgres(tmp_path / "pg", 55432)
    assert server.url() == "postgresql+psycopg://kafka_health@127.0.0.1:55432/kafka_health"
    assert server.url("other") == "postgresql+psycopg://kafka_health@127.0.0.1:55432/other"


def test_constructor_validates_and_touches_nothing(tmp_path: Path) -> None:
    home = tmp_path / "pg"
    server = LocalPostgres(home, 55433)
    assert server.home == home and server.data == home / "data"
    assert not home.exists()
    for bad in (0, 65536, -1, True):
        with pytest.raises(ValueError, match="port"):
            LocalPostgres(home, bad)
    with pytest.raises(ValueError, match="port"):
        LocalPostgres(home, "5432")  # type: ignore[arg-type]


def test_a_server_never_initialised_is_not_running(tmp_path: Path) -> None:
    server = LocalPostgres(tmp_path / "pg", 55499)
    assert server.status() is False
    assert server.down() is False
    assert not (tmp_path / "pg").exists()


@pytest.mark.parametrize(
    ("url", "masked"),
    [
        ("postgresql+psycopg://u:secret@db:5432/x", "postgresql+psycopg://u:***@db:5432/x"),
        ("postgresql+psycopg://u@db/x", "postgresql+psycopg://u@db/x"),
        (
            "postgresql+psycopg://u:p%40ss@db/x?sslmode=require",
            "postgresql+psycopg://u:***@db/x?sslmode=require",
        ),
    ],
)
def test_mask_url_hides_the_password(url: str, masked: str) -> None:
    assert mask_url(url) == masked


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("postgres://u:p@db:5432/x", "postgresql+psycopg://u:p@db:5432/x"),
        ("postgresql://u:p@db/x", "postgresql+psycopg://u:p@db/x"),
        ("postgresql+psycopg://u:p@db/x", "postgresql+psycopg://u:p@db/x"),
    ],
)
def test_normalize_url_selects_psycopg(url: str, normal: str) -> None:
    assert normalize_url(url) == normal


def test_an_invalid_url_is_refused_without_repeating_it() -> None:
    with pytest.raises(StoreUnavailableError) as caught:
        mask_url("not a url with hunter2")
    assert "hunter2" not in str(caught.value)


# -- binary discovery ---------------------------------------------------------------------------


def _fake_bindir(root: Path, version: str, programs: tuple[str, ...] = postgres.REQUIRED_PROGRAMS) -> Path:
    bindir = root / version / "bin"
    bindir.mkdir(parents=True)
    for program in programs:
        (bindir / program).write_text("#!/bin/sh\n")
    return bindir


def test_find_binaries_takes_the_newest_complete_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    _fake_bindir(tmp_path, "9.6")
    newest = _fake_bindir(tmp_path, "13")
    _fake_bindir(tmp_path, "17", programs=("pg_ctl",))  # client tools only: not a server
    assert find_binaries(roots=[tmp_path], install=False) == newest


def test_missing_binaries_say_how_to_fix_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    monkeypatch.setattr(postgres, "_is_root", lambda: False)
    with pytest.raises(DevEnvironmentError) as caught:
        find_binaries(roots=[tmp_path])
    message = str(caught.value)
    assert "Install the PostgreSQL server package" in message
    assert "apt-get install postgresql" in message
    assert "DATABASE_URL" in message


def test_as_root_missing_binaries_are_installed_with_apt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[list[str]] = []

    def fake_apt(args: list[str], log: object) -> int:
        calls.append(args)
        if args[0] == "update":
            return 0
        if len(calls) == 1:
            return 100  # "Unable to locate package" before the lists are refreshed
        _fake_bindir(tmp_path, "15")
        return 0

    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/apt-get" if name == "apt-get" else None)
    monkeypatch.setattr(postgres, "_is_root", lambda: True)
    monkeypatch.setattr(postgres, "_apt_get", fake_apt)
    messages: list[str] = []
    assert find_binaries(roots=[tmp_path], log=messages.append) == tmp_path / "15" / "bin"
    assert [c[0] for c in calls] == ["install", "update", "install"]
    assert any("installing" in m for m in messages)


# -- start-up failures --------------------------------------------------------------------------

_FAKE_INITDB = """#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = "-D" ] && data="$2"; shift; done
mkdir -p "$data" && echo 15 > "$data/PG_VERSION" && touch "$data/postgresql.conf"
"""
_FAKE_PG_CTL = """#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = "-l" ] && log="$2"; shift; done
echo "FATAL:  could not map anonymous shared memory: Cannot allocate memory" >> "$log"
echo "pg_ctl: could not start server" >&2
exit 1
"""
_FAKE_POSTGRES = """#!/bin/sh
echo "postgres (PostgreSQL) 15.18"
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_that_fails_to_start_shows_its_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, script in (("initdb", _FAKE_INITDB), ("pg_ctl", _FAKE_PG_CTL), ("postgres", _FAKE_POSTGRES)):
        (bindir / name).write_text(script)
        (bindir / name).chmod(0o755)
    monkeypatch.setattr(postgres, "find_binaries", lambda **kwargs: bindir)
    monkeypatch.setattr(postgres, "_is_root", lambda: False)
    server = LocalPostgres(tmp_path / "pg", _free_port(), log=lambda message: None)
    with pytest.raises(DevEnvironmentError) as caught:
        server.up()
    message = str(caught.value)
    assert "did not start" in message
    assert "could not map anonymous shared memory" in message
    assert "127.0.0.1/32   trust" in (server.data / "pg_hba.conf").read_text()
    settings = (server.data / postgres.SETTINGS_FILE).read_text()
    assert "listen_addresses = '127.0.0.1'" in settings
    assert f"port = {server.port}" in settings


def test_a_busy_port_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(postgres, "find_binaries", lambda **kwargs: tmp_path)
    monkeypatch.setattr(postgres, "_is_root", lambda: False)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = LocalPostgres(tmp_path / "pg", busy.getsockname()[1], log=lambda message: None)
        with pytest.raises(DevEnvironmentError, match="is used by another program"):
            server.up()


SERVER_USER = pwd.struct_passwd(
    ("kh-test-postgres", "x", 4_242_424, 4_242_424, "", "/nonexistent", "/bin/false")
)
"""The OS user the server would run as, as root: a user that owns nothing here and is in no group
of ours, so only the folders' "other" permissions let it in, whoever runs the tests."""


def _as_root_with_server_user(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`up` as root sees it: the binaries found, and `postgres.OS_USER` being `SERVER_USER`."""
    monkeypatch.setattr(postgres, "_is_root", lambda: True)
    monkeypatch.setattr(postgres, "find_binaries", lambda **kwargs: tmp_path)

    def getpwnam(name: str) -> pwd.struct_passwd:
        assert name == postgres.OS_USER
        return SERVER_USER

    monkeypatch.setattr(postgres.pwd, "getpwnam", getpwnam)


def test_as_root_an_unreachable_home_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "private"
    locked.mkdir()
    locked.chmod(stat.S_IRWXU)
    _as_root_with_server_user(monkeypatch, tmp_path)
    server = LocalPostgres(locked / "pg", _free_port(), log=lambda message: None)
    with pytest.raises(DevEnvironmentError) as caught:
        server.up()
    message = str(caught.value)
    # The first folder on the way that the server's user cannot enter is named (pytest's own
    # temporary root is private too).
    named = message.split("cannot enter ", 1)[1].split(". ", 1)[0]
    assert Path(named) in (locked, *locked.parents)
    assert f"chmod o+x {named}" in message
    assert not (locked / "pg" / "data").exists(), "nothing initialised"


def test_as_root_without_a_postgres_user_the_fix_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _as_root_with_server_user(monkeypatch, tmp_path)

    def no_such_user(name: str) -> pwd.struct_passwd:
        raise KeyError(f"getpwnam(): name not found: {name!r}")

    monkeypatch.setattr(postgres.pwd, "getpwnam", no_such_user)
    server = LocalPostgres(tmp_path / "pg", _free_port(), log=lambda message: None)
    with pytest.raises(
        DevEnvironmentError, match=r"no 'postgres' OS user.*install Debian's postgresql package"
    ):
        server.up()


# -- the db commands with an external database --------------------------------------------------


def test_db_commands_mask_an_external_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://ops:topsecret@db.example:5432/health")
    monkeypatch.delenv("KAFKA_HEALTH_DATABASE__URL", raising=False)
    runner = CliRunner()
    printed = runner.invoke(app, ["db", "url"])
    assert printed.exit_code == 0, printed.output
    assert printed.stdout.strip() == "postgresql+psycopg://ops:***@db.example:5432/health"
    for command, verb in (("up", "start"), ("down", "stop")):
        result = runner.invoke(app, ["db", command])
        assert result.exit_code == 0, result.output
        assert f"nothing to {verb}" in result.output
        assert "ops:***@db.example" in result.output
        assert "topsecret" not in result.output


def test_db_help_lists_every_command() -> None:
    result = CliRunner().invoke(app, ["db", "--help"])
    assert result.exit_code == 0
    for command in ("up", "down", "status", "url", "migrate", "downgrade"):
        assert command in result.output

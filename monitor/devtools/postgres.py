"""The project-local PostgreSQL: a private server under ``var/``, on 127.0.0.1, for development and tests.

It uses the PostgreSQL server binaries already on the machine (Debian's package, or whatever
``pg_config --bindir`` names); as root, on a machine without them, it installs Debian's
``postgresql`` package. PostgreSQL refuses to run as root, so as root every server command runs
as the ``postgres`` OS user, which then owns the home directory.

Layout of ``home``: ``data/`` (the cluster), ``run/`` (the unix socket), ``postgres.log``.
Authentication is ``trust``, and only for the unix socket and 127.0.0.1: this is a development
server that must never listen on another address.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pwd
import re
import shutil
import socket
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy.engine import URL, make_url

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.processes import accepts_connections

SUPERUSER = "kafka_health"
DEFAULT_DATABASE = "kafka_health"
OS_USER = "postgres"
PG_LIB = Path("/usr/lib/postgresql")
REQUIRED_PROGRAMS = ("initdb", "pg_ctl", "postgres")
SETTINGS_FILE = "kafka_health.conf"
START_TIMEOUT_SECONDS = 60
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes on Linux; keep a margin

NOT_FOUND = (
    "PostgreSQL server binaries (initdb, pg_ctl, postgres) were not found in "
    f"{PG_LIB}/<version>/bin nor through `pg_config --bindir`. Install the PostgreSQL server "
    "package (Debian/Ubuntu: `sudo apt-get install postgresql`; Fedora: `postgresql-server`; "
    "macOS: `brew install postgresql`), or set DATABASE_URL to use an existing server."
)

Log = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _is_root() -> bool:
    return os.geteuid() == 0


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", path.parent.name)) or (0,)


def _complete(bindir: Path) -> bool:
    return all((bindir / program).is_file() for program in REQUIRED_PROGRAMS)


def _search(roots: Sequence[Path]) -> Path | None:
    for root in roots:
        candidates = [d for d in root.glob("*/bin") if _complete(d)]
        if candidates:
            return max(candidates, key=_version_key)
    pg_config = shutil.which("pg_config")
    if pg_config:
        result = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        bindir = Path(result.stdout.strip())
        if result.returncode == 0 and _complete(bindir):
            return bindir
    return None


def _apt_get(args: list[str], log: Log) -> int:
    log(f"$ apt-get {' '.join(args)}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], env=env, stdin=subprocess.DEVNULL, check=False).returncode


def _apt_install(log: Log) -> None:
    log("PostgreSQL server binaries not found; installing Debian's `postgresql` package with apt-get")
    install = ["install", "-y", "--no-install-recommends", "postgresql"]
    if _apt_get(install, log) != 0:
        log("apt-get could not install it; refreshing the package lists and trying again")
        if _apt_get(["update"], log) != 0 or _apt_get(install, log) != 0:
            raise DevEnvironmentError(
                "apt-get could not install the `postgresql` package (see its output above). "
                "Install the PostgreSQL server package yourself, or set DATABASE_URL to use an "
                "existing server."
            )


def find_binaries(
    *, roots: Sequence[Path] = (PG_LIB,), install: bool | None = None, log: Log = _stderr
) -> Path:
    """The directory holding initdb, pg_ctl and postgres: the newest ``<root>/<version>/bin``, else
    ``pg_config --bindir``. When none is found and `install` (default: running as root) is true
    and apt-get exists, Debian's ``postgresql`` package is installed, with apt-get's output shown.

    Raises DevEnvironmentError saying to install the server package or to set DATABASE_URL.
    """
    found = _search(roots)
    if found is not None:
        return found
    if install is None:
        install = _is_root()
    if install and shutil.which("apt-get"):
        _apt_install(log)
        found = _search(roots)
        if found is not None:
            log(f"PostgreSQL server binaries installed in {found}")
            return found
    raise DevEnvironmentError(NOT_FOUND)


def _libpq_params(url: str) -> dict[str, Any]:
    parsed = make_url(url)
    params: dict[str, Any] = parsed.translate_connect_args(username="user", database="dbname")
    params.update({key: value for key, value in parsed.query.items() if isinstance(value, str)})
    return params


def create_database(admin_url: str, name: str) -> bool:
    """Create database `name` through the server at `admin_url`; False if it already existed."""
    with psycopg.connect(**_libpq_params(admin_url), autocommit=True, connect_timeout=10) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return False
        try:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        except psycopg.errors.DuplicateDatabase:
            return False
        return True


def copy_database(admin_url: str, name: str, template: str) -> None:
    """Create database `name` as a copy of `template` (CREATE DATABASE ... TEMPLATE, which no session
    may be connected to), with the template's grants on the database itself: a copy starts with the
    server's default ACL."""
    with psycopg.connect(**_libpq_params(admin_url), autocommit=True, connect_timeout=10) as conn:
        names = (sql.Identifier(name), sql.Identifier(template))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(*names))
        grants = conn.execute(
            "SELECT r.rolname, a.privilege_type FROM pg_database d CROSS JOIN LATERAL aclexplode(d.datacl) a"
            " JOIN pg_roles r ON r.oid = a.grantee WHERE d.datname = %s AND a.grantee <> d.datdba",
            (template,),
        ).fetchall()
        for role, privilege in grants:
            grant = sql.SQL("GRANT {} ON DATABASE {} TO {}")
            conn.execute(grant.format(sql.SQL(privilege), sql.Identifier(name), sql.Identifier(role)))


def drop_database(admin_url: str, name: str) -> None:
    """Drop database `name` (if it exists), disconnecting its sessions first."""
    with psycopg.connect(**_libpq_params(admin_url), autocommit=True, connect_timeout=10) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            raise
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by another user
    return True


def _traversable(path: Path, user: pwd.struct_passwd) -> bool:
    info = path.stat()
    if info.st_uid == user.pw_uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid in os.getgrouplist(user.pw_name, user.pw_gid):
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


class LocalPostgres:
    """A PostgreSQL server owned by this project, kept under `home`, listening on 127.0.0.1:`port`.

    The constructor only validates; `up()` installs (as root, if needed), initialises, starts and
    creates the ``kafka_health`` database, and is safe to call again. Every method that touches
    the server raises DevEnvironmentError with a message that says what to do.
    """

    def __init__(self, home: Path, port: int, *, log: Log = _stderr) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"port must be an integer between 1 and 65535, got {port!r}")
        if not str(home):
            raise ValueError("home must be a directory path")
        self.home = Path(home).absolute()
        self.port = port
        self.data = self.home / "data"
        self.socket_dir = self.home / "run"
        self.log_file = self.home / "postgres.log"
        self._log = log
        self._bindir: Path | None = None

    def __repr__(self) -> str:
        return f"LocalPostgres(home={str(self.home)!r}, port={self.port})"

    # -- addresses --------------------------------------------------------------------------------

    def url(self, dbname: str = DEFAULT_DATABASE) -> str:
        """SQLAlchemy URL of database `dbname` on this server (trust auth: no password)."""
        if not dbname:
            raise ValueError("dbname must not be empty")
        return URL.create(
            "postgresql+psycopg", username=SUPERUSER, host="127.0.0.1", port=self.port, database=dbname
        ).render_as_string(hide_password=False)

    def find_binaries(self, *, install: bool | None = None) -> Path:
        if self._bindir is None:
            self._bindir = find_binaries(install=install, log=self._log)
        return self._bindir

    # -- lifecycle --------------------------------------------------------------------------------

    def status(self) -> bool:
        """True when this server's postmaster is alive and accepting TCP connections."""
        postmaster = self._postmaster()
        if postmaster is None:
            return False
        return _pid_alive(postmaster[0]) and accepts_connections("127.0.0.1", postmaster[1])

    def up(self) -> None:
        """Start the server (initialising it the first time) and create the kafka_health database.

        Idempotent: a running server on this port is left alone.
        """
        self.home.mkdir(parents=True, exist_ok=True)
        with self._locked():
            postmaster = self._postmaster()
            if postmaster is not None and _pid_alive(postmaster[0]):
                if postmaster[1] != self.port:
                    raise DevEnvironmentError(
                        f"the local PostgreSQL in {self.home} is already running on port "
                        f"{postmaster[1]}, not {self.port}; stop it first (kafka-health db down)"
                    )
            else:
                self._start_server()
            self.create_database(DEFAULT_DATABASE)

    def down(self) -> bool:
        """Stop the server (fast shutdown); False when it was not running."""
        if not (self.data / "PG_VERSION").exists():
            return False
        with self._locked():
            postmaster = self._postmaster()
            if postmaster is None or not _pid_alive(postmaster[0]):
                return False
            pg_ctl = self.find_binaries(install=False) / "pg_ctl"
            stop = [str(pg_ctl), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop"]
            result = self._run(stop)
            if result.returncode != 0:
                raise DevEnvironmentError(
                    f"pg_ctl could not stop the local PostgreSQL in {self.data}: "
                    f"{(result.stderr or result.stdout).strip()}"
                )
            return True

    def create_database(self, name: str) -> bool:
        """Create database `name` on this running server; False if it already existed."""
        return create_database(self.url("postgres"), name)

    def drop_database(self, name: str) -> None:
        drop_database(self.url("postgres"), name)

    # -- steps of up() ----------------------------------------------------------------------------

    def _start_server(self) -> None:
        bindir = self.find_binaries()
        self._prepare_home()
        if not _port_free(self.port):
            raise DevEnvironmentError(
                f"port {self.port} on 127.0.0.1 is used by another program, not by the local "
                f"PostgreSQL in {self.home}; stop that program or choose another port "
                "(database.local_port, or KAFKA_HEALTH_DATABASE__LOCAL_PORT)"
            )
        self._initdb(bindir)
        self._write_settings()
        self._log(f"starting PostgreSQL on 127.0.0.1:{self.port} (data in {self.data})")
        start = [str(bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log_file)]
        result = self._run([*start, "-w", "-t", str(START_TIMEOUT_SECONDS), "start"])
        if result.returncode != 0:
            raise DevEnvironmentError(
                f"PostgreSQL did not start (pg_ctl exit {result.returncode}: "
                f"{(result.stderr or result.stdout).strip()}). Last lines of {self.log_file}:\n"
                f"{self._log_tail()}"
            )

    def _prepare_home(self) -> None:
        self.socket_dir.mkdir(exist_ok=True)
        user = self._os_user()
        if user is None:
            return
        for folder in [*reversed(self.home.parents), self.home]:
            if not _traversable(folder, user):
                raise DevEnvironmentError(
                    f"PostgreSQL runs as the OS user {OS_USER!r} (it refuses root), which cannot "
                    f"enter {folder}. Allow it (chmod o+x {folder}) or keep the state elsewhere "
                    "with KAFKA_HEALTH_VAR=<a directory it can reach>."
                )
        if self.home.stat().st_uid != user.pw_uid:
            for path in [self.home, *self.home.rglob("*")]:
                os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
        os.chown(self.socket_dir, user.pw_uid, user.pw_gid)

    def _initdb(self, bindir: Path) -> None:
        version_file = self.data / "PG_VERSION"
        if version_file.exists():
            self._check_version(bindir, version_file.read_text().strip())
            return
        if self.data.exists() and any(self.data.iterdir()):
            raise DevEnvironmentError(
                f"{self.data} is not empty but holds no PostgreSQL cluster; remove it and run again"
            )
        self._log(f"initialising a PostgreSQL cluster in {self.data}")
        initdb = [str(bindir / "initdb"), "-D", str(self.data), "-U", SUPERUSER]
        result = self._run([*initdb, "--auth=trust", "-E", "UTF8", "--locale=C"])
        if result.returncode != 0:
            raise DevEnvironmentError(
                f"initdb failed in {self.data}:\n{_tail(result.stderr or result.stdout)}"
            )
        self._write(self.data / "pg_hba.conf", _HBA)
        main_conf = self.data / "postgresql.conf"
        include = f"include_if_exists = '{SETTINGS_FILE}'\n"
        if include not in main_conf.read_text():
            with main_conf.open("a") as handle:
                handle.write(f"\n{include}")

    def _check_version(self, bindir: Path, data_version: str) -> None:
        result = subprocess.run(
            [str(bindir / "postgres"), "--version"], capture_output=True, text=True, check=False
        )
        match = re.search(r"\) (\d+)", result.stdout)
        if match and match.group(1) != data_version.split(".")[0]:
            raise DevEnvironmentError(
                f"{self.data} was created by PostgreSQL {data_version} but the binaries in {bindir} "
                f"are version {match.group(1)}; remove {self.data} (its data is lost) and run again"
            )

    def _write_settings(self) -> None:
        socket_path = self.socket_dir / f".s.PGSQL.{self.port}"
        sockets = str(self.socket_dir) if len(str(socket_path)) <= _SOCKET_PATH_MAX else ""
        if not sockets:
            self._log(f"{self.socket_dir} is too long for a unix socket; TCP only")
        settings = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{sockets}'",
            "max_connections": "200",
            "shared_buffers": "128MB",
            "fsync": "on",
            "timezone": "'UTC'",
            "log_timezone": "'UTC'",
            "log_min_messages": "warning",
            "log_line_prefix": "'%m [%p] %q%u@%d '",
        }
        lines = [f"{key} = {value}" for key, value in settings.items()]
        text = "# Rewritten by `kafka-health db up` at every start.\n" + "\n".join(lines) + "\n"
        self._write(self.data / SETTINGS_FILE, text)

    # -- helpers ----------------------------------------------------------------------------------

    def _postmaster(self) -> tuple[int, int] | None:
        """(pid, port) from postmaster.pid, or None when there is no readable pid file."""
        try:
            lines = (self.data / "postmaster.pid").read_text().splitlines()
            return int(lines[0]), int(lines[3])
        except (OSError, IndexError, ValueError):
            return None

    def _os_user(self) -> pwd.struct_passwd | None:
        """The OS user the server runs as when we are root; None when it runs as ourselves."""
        if not _is_root():
            return None
        try:
            return pwd.getpwnam(OS_USER)
        except KeyError as exc:
            raise DevEnvironmentError(
                f"running as root, but there is no {OS_USER!r} OS user to run PostgreSQL as; "
                "install Debian's postgresql package (it creates the user) or run as a normal user"
            ) from exc

    def _run(self, command: list[str]) -> subprocess.CompletedProcess[str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
        env["LC_ALL"] = "C"
        user = self._os_user()
        as_user: dict[str, Any] = {}
        if user is not None:
            env["HOME"] = str(self.home)
            groups = os.getgrouplist(user.pw_name, user.pw_gid)
            as_user = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": groups}
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            cwd=self.home,
            env=env,
            start_new_session=True,
            check=False,
            **as_user,
        )

    def _write(self, path: Path, text: str) -> None:
        path.write_text(text)
        user = self._os_user()
        if user is not None:
            os.chown(path, user.pw_uid, user.pw_gid)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return _tail(self.log_file.read_text(errors="replace"), lines)
        except OSError as exc:
            return f"(cannot read it: {exc.strerror})"

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Serialise up/down between processes sharing this home (e.g. parallel test sessions)."""
        with (self.home / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


_HBA = """\
# Written by kafka-health: trust, and only for the unix socket and 127.0.0.1.
# TYPE  DATABASE  USER  ADDRESS        METHOD
local   all       all                  trust
host    all       all   127.0.0.1/32   trust
"""


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])

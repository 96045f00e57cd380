"""A local OpenID provider for the dev cluster's OAUTHBEARER mechanism: NAV's mock-oauth2-server,
a standalone OAuth 2 / OpenID Connect server (discovery, client-credentials grant, JWKS), run from
its jars on Maven Central (fetched once by `mvn`, like the Kafka jars) as a detached JVM.

It issues signed JWTs for the issuer `ISSUER_ID` (`http://127.0.0.1:<port>/kafka`): to any
client id and secret (it checks neither: the brokers check the token), with `sub` = the client id,
`aud` = `AUDIENCE` and a lifetime of `token_seconds`. The brokers validate them against its JWKS.
Keycloak was the first choice; its start-up took 85-117 s on the 2-core machine the tests run on,
this one about 10-20 s.

State under `directory`: `config.json` (its token settings), `provider.log`, `pid`.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import httpx

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.kafka_security import OidcIssuer
from monitor.devtools.mvn import fetch_runtime
from monitor.devtools.processes import java_executable, port_in_use, process_alive, tail, wait_gone

HOST: Final = "127.0.0.1"
ISSUER_ID: Final = "kafka"
AUDIENCE: Final = "kafka-broker"
_MAIN_CLASS: Final = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"
_START_TIMEOUT: Final = 120.0


class DevOidcProvider:
    """Fetch, start and stop the provider on `HOST:port`. The constructor starts nothing; `up()`
    is idempotent (a provider already answering from `directory` is left alone)."""

    def __init__(self, directory: Path, cache: Path, port: int, token_seconds: int = 300) -> None:
        if not 5 <= token_seconds <= 86400:
            raise ValueError("token_seconds must be between 5 and 86400")
        self.directory = directory
        self.cache = cache
        self.port = port
        self.token_seconds = token_seconds

    def __repr__(self) -> str:
        return f"DevOidcProvider(port={self.port}, token_seconds={self.token_seconds})"

    @property
    def issuer(self) -> OidcIssuer:
        return OidcIssuer(f"http://{HOST}:{self.port}/{ISSUER_ID}", AUDIENCE)

    @property
    def log_path(self) -> Path:
        return self.directory / "provider.log"

    def _pid_file(self) -> Path:
        return self.directory / "pid"

    def running_pid(self) -> int | None:
        try:
            pid = int(self._pid_file().read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            return None
        return pid if _MAIN_CLASS in cmdline and process_alive(pid) else None

    def ensure_jars(self) -> Path:
        return fetch_runtime(
            "oidc", self.cache / "oidc-provider", "mock-oauth2-server-*.jar", "the OpenID provider"
        )

    def config(self) -> dict[str, object]:
        """The provider's token settings: client-credentials tokens for the brokers' audience."""
        claims = {"sub": "${clientId}", "aud": [AUDIENCE]}
        mapping = {"requestParam": "grant_type", "match": "client_credentials", "claims": claims}
        return {
            "httpServer": "NettyWrapper",
            "tokenCallbacks": [
                {"issuerId": ISSUER_ID, "tokenExpiry": self.token_seconds, "requestMappings": [mapping]}
            ],
        }

    def up(self) -> OidcIssuer:
        """Start the provider unless it runs; wait until its discovery document answers."""
        if self.running_pid() is not None and self._answers():
            return self.issuer
        libs = self.ensure_jars()
        if port_in_use(HOST, self.port):
            raise DevEnvironmentError(
                f"port {self.port} on {HOST} (the OpenID provider's) is already in use; stop what "
                "listens there or choose another port"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "config.json").write_text(json.dumps(self.config()), encoding="utf-8")
        env = {
            **os.environ,
            "SERVER_HOSTNAME": HOST,
            "SERVER_PORT": str(self.port),
            "JSON_CONFIG_PATH": str(self.directory / "config.json"),
            "LOG_LEVEL": "DEBUG",  # one line per token request: the tests count the refreshes
        }
        command = [java_executable("the OpenID provider"), "-Xmx128m", "-cp", f"{libs}/*", _MAIN_CLASS]
        with self.log_path.open("ab") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.directory, env=env, start_new_session=True,
            )  # fmt: skip
        self._pid_file().write_text(f"{process.pid}\n", encoding="utf-8")
        deadline = time.monotonic() + _START_TIMEOUT
        while not self._answers():
            if process.poll() is not None or time.monotonic() > deadline:
                self.down()
                raise DevEnvironmentError(
                    f"the OpenID provider did not start on {HOST}:{self.port}; its log "
                    f"({self.log_path}):\n{tail(self.log_path)}"
                )
            time.sleep(0.3)
        return self.issuer

    def _answers(self) -> bool:
        try:
            response = httpx.get(self.issuer.discovery_url, timeout=2)
        except httpx.HTTPError:
            return False
        return response.status_code == httpx.codes.OK

    def down(self) -> None:
        """Stop the provider (SIGTERM, SIGKILL after 15 s); nothing if it does not run."""
        pid = self.running_pid()
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            if not wait_gone([pid], 15.0):
                os.kill(pid, signal.SIGKILL)
                wait_gone([pid], 5.0)
        self._pid_file().unlink(missing_ok=True)

    def token_requests(self) -> list[TokenRequest]:
        """Every token request the provider logged, in order."""
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        found: list[TokenRequest] = []
        for line in text.splitlines():
            if "handle token request" in line:
                when = datetime.datetime.strptime(line[:19], "%Y-%m-%d %H:%M:%S")
                found.append(TokenRequest(when, ""))
            elif line.startswith("User-Agent:") and found:
                found[-1] = TokenRequest(found[-1].at, line.removeprefix("User-Agent:").strip())
        return found


@dataclass(frozen=True, slots=True)
class TokenRequest:
    """One token request the provider answered: when (its local time, to the second) and the
    client's User-Agent ("" when it sent none, as librdkafka)."""

    at: datetime.datetime
    user_agent: str

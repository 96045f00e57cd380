"""The real servers the push and Alertmanager integrations talk to, started locally on 127.0.0.1:
Debian's `prometheus` (scraping the daemon, and receiving remote write), Debian's
`prometheus-alertmanager`, and moto's server standing in for Amazon CloudWatch over HTTP.

Each runs as a child process with its data and log under a directory of `var/`, is ready when its
HTTP readiness endpoint answers, and is stopped with SIGTERM (SIGKILL after a grace period).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import yaml

from monitor.core.errors import DevEnvironmentError
from monitor.devtools.processes import port_in_use, tail

READY_TIMEOUT = 60.0


class LocalServer:
    """One server process: `start()` waits until `ready_path` answers 200; `stop()` is idempotent."""

    kind = "server"
    ready_path = "/"
    package = ""

    def __init__(self, directory: Path, port: int) -> None:
        self.directory = directory
        self.port = port
        self.log_path = directory / f"{self.kind}.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        raise NotImplementedError

    def prepare(self) -> None:
        """Write what the server reads before it starts (configuration files)."""

    def start(self) -> None:
        if port_in_use("127.0.0.1", self.port):
            raise DevEnvironmentError(
                f"{self.kind}: port {self.port} on 127.0.0.1 is taken; stop what listens there or "
                "choose another port"
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        self.prepare()
        command = self.command()
        with self.log_path.open("ab") as log_file:
            self._process = subprocess.Popen(
                command, stdout=log_file, stderr=subprocess.STDOUT, cwd=self.directory, start_new_session=True
            )
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise DevEnvironmentError(
                    f"{self.kind} exited with {self._process.returncode} at start; its log "
                    f"({self.log_path}):\n{tail(self.log_path)}"
                )
            try:
                if httpx.get(self.url + self.ready_path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise DevEnvironmentError(
            f"{self.kind} did not answer on {self.url} within {READY_TIMEOUT:.0f} s; its log "
            f"({self.log_path}):\n{tail(self.log_path)}"
        )

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)

    def __enter__(self) -> LocalServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _system_binary(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise DevEnvironmentError(
            f"`{name}` is not installed; install Debian's package (`apt-get install {package}`) or "
            "run `make install`, which does"
        )
    return found


class PrometheusServer(LocalServer):
    """Debian's Prometheus with the remote-write receiver on, scraping `scrape_targets` (host:port
    of `/metrics` endpoints) every `scrape_interval`, and evaluating the rule files `rule_files`
    (as `kafka-health rules export --format prometheus` writes them) at the same interval."""

    kind = "prometheus"
    ready_path = "/-/ready"

    def __init__(
        self,
        directory: Path,
        port: int,
        scrape_targets: Sequence[str] = (),
        scrape_interval: str = "2s",
        rule_files: Sequence[Path] = (),
    ) -> None:
        super().__init__(directory, port)
        self.scrape_targets = list(scrape_targets)
        self.scrape_interval = scrape_interval
        self.rule_files = list(rule_files)

    @property
    def remote_write_url(self) -> str:
        return f"{self.url}/api/v1/write"

    def prepare(self) -> None:
        config: dict[str, Any] = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": [],
        }
        if self.rule_files:
            config["rule_files"] = [str(path.resolve()) for path in self.rule_files]
        if self.scrape_targets:
            config["scrape_configs"].append(
                {
                    "job_name": "kafka-health",
                    "scrape_timeout": self.scrape_interval,
                    "static_configs": [{"targets": self.scrape_targets}],
                }
            )
        (self.directory / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")

    def command(self) -> list[str]:
        return [
            _system_binary("prometheus", "prometheus"),
            f"--config.file={self.directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-remote-write-receiver",
            "--log.level=warn",
        ]

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector `promql` evaluates to now: [{"metric": {...}, "value": [t, "v"]}]."""
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        response.raise_for_status()
        body = response.json()
        if body.get("status") != "success":
            raise DevEnvironmentError(f"prometheus: query {promql!r} failed: {body}")
        result: list[dict[str, Any]] = body["data"]["result"]
        return result

    def alerts(self) -> list[dict[str, Any]]:
        """The alerts of the loaded rules, pending and firing: `/api/v1/alerts`' list of
        {"labels", "annotations", "state", "value", ...}."""
        response = httpx.get(f"{self.url}/api/v1/alerts", timeout=10)
        response.raise_for_status()
        alerts: list[dict[str, Any]] = response.json()["data"]["alerts"]
        return alerts

    def rule_health(self) -> list[tuple[str, str, str]]:
        """(rule name, health, last error) of every loaded rule, from `/api/v1/rules`."""
        response = httpx.get(f"{self.url}/api/v1/rules", timeout=10)
        response.raise_for_status()
        groups = response.json()["data"]["groups"]
        return [(r["name"], r["health"], r.get("lastError", "")) for g in groups for r in g["rules"]]


class AlertmanagerServer(LocalServer):
    """Debian's Alertmanager, one instance (no cluster gossip), with a webhook receiver config
    pointing at `webhook_url` when given (else a receiver that sends nothing)."""

    kind = "alertmanager"
    ready_path = "/-/ready"

    def __init__(self, directory: Path, port: int, webhook_url: str | None = None) -> None:
        super().__init__(directory, port)
        self.webhook_url = webhook_url

    def prepare(self) -> None:
        receiver: dict[str, Any] = {"name": "default"}
        if self.webhook_url:
            receiver["webhook_configs"] = [{"url": self.webhook_url, "send_resolved": True}]
        config = {
            "route": {
                "receiver": "default",
                "group_by": ["alertname"],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [receiver],
        }
        (self.directory / "alertmanager.yml").write_text(yaml.safe_dump(config), encoding="utf-8")

    def command(self) -> list[str]:
        return [
            _system_binary("prometheus-alertmanager", "prometheus-alertmanager"),
            f"--config.file={self.directory / 'alertmanager.yml'}",
            f"--storage.path={self.directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]


class MotoServer(LocalServer):
    """moto's server (`moto[server]`, a development dependency) answering the AWS APIs over HTTP;
    the tests point boto3's `endpoint_url` at it to stand in for CloudWatch."""

    kind = "moto"
    ready_path = "/moto-api/"

    def command(self) -> list[str]:
        moto = Path(sys.executable).parent / "moto_server"
        if not moto.exists():
            raise DevEnvironmentError(
                "moto_server is not installed in this virtualenv; `pip install 'moto[server]'` "
                "(it is in the dev extra: `make install`)"
            )
        return [str(moto), "-H", "127.0.0.1", "-p", str(self.port)]

"""The tools that check the Helm chart (`deploy/helm/kafka-health`): Helm itself and the schema of
the ServiceMonitor the chart can render, both from the Go module proxy, pinned, fetched once into
the cache (`$KAFKA_HEALTH_CACHE`) and reused after that; nothing is fetched when they are there.

- Helm: `go install helm.sh/helm/v3/cmd/helm@<HELM_VERSION>` into `<cache>/helm/<version>/`
  (the Go toolchain compiles it once, a few minutes on two cores; `go` from PATH or
  /usr/local/go/bin).
- The ServiceMonitor's OpenAPI schema: the CustomResourceDefinition the Prometheus Operator ships in
  its Go module (`go mod download`), copied to `<cache>/helm/`.

The Kubernetes schemas themselves come with the `kubernetes-validate` Python package (a dev
dependency), so validation needs no network at all.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from monitor.core.errors import MonitorError
from monitor.devtools.paths import cache_dir

HELM_VERSION: Final = "v3.22.0"
HELM_MODULE: Final = "helm.sh/helm/v3"
HELM_KUBE_VERSION: Final = ("1", "37")
"""The Kubernetes release Helm assumes when no cluster says (`helm template`, `helm lint`): that of
the client-go it is built with (v0.37 for v3.22), set at link time as Helm's own Makefile does."""
PROMETHEUS_OPERATOR_MODULE: Final = "github.com/prometheus-operator/prometheus-operator"
PROMETHEUS_OPERATOR_VERSION: Final = "v0.85.0"
SERVICE_MONITOR_CRD: Final = "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
BUILD_TIMEOUT_SECONDS: Final = 1800.0
"""Compiling Helm on a busy two-core machine takes minutes; past this something is wrong."""
GO_FALLBACK: Final = Path("/usr/local/go/bin/go")


class ToolError(MonitorError):
    """A chart tool could not be installed."""


def tools_dir(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "helm"


def helm_path(cache: Path | None = None) -> Path:
    return tools_dir(cache) / HELM_VERSION / "helm"


def _go() -> str:
    found = shutil.which("go") or (str(GO_FALLBACK) if GO_FALLBACK.is_file() else None)
    if found is None:
        raise ToolError(
            "the Go toolchain is missing: Helm is built from the Go module proxy with `go install`; "
            "install Go (Debian: apt-get install golang-go, or /usr/local/go) and run again"
        )
    return found


def _run_go(args: list[str], env: dict[str, str], what: str, *, background: bool = False) -> str:
    """Run `go`; `background`: at the lowest CPU priority, one package at a time (it then takes
    only what the rest of the machine leaves)."""
    command = [_go(), *args]
    if background:
        command = ["nice", "-n", "19", *command]
        env = {**env, "GOFLAGS": "-p=1", "GOMAXPROCS": "1"}
    try:
        done = subprocess.run(
            command,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ToolError(f"{what} took longer than {BUILD_TIMEOUT_SECONDS:.0f} s") from exc
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise ToolError(f"{what} failed (exit {done.returncode}):\n{tail}")
    return done.stdout


def _helm_works(path: Path) -> bool:
    if not os.access(path, os.X_OK):
        return False
    try:
        done = subprocess.run([str(path), "version", "--short"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.startswith(HELM_VERSION)


def ensure_helm(
    cache: Path | None = None, report: Callable[[str], None] = print, *, background: bool = False
) -> Path:
    """The pinned Helm binary, built from the Go module proxy the first time. Idempotent; the
    binary appears whole or not at all. `background`: build at the lowest priority (a test
    session starts it at once and takes the binary when its Helm tests run).

    Raises ToolError (naming what to install or what failed) when it cannot be built."""
    target = helm_path(cache)
    if _helm_works(target):
        return target
    report(f"building Helm {HELM_VERSION} from the Go module proxy (once; a few minutes) ...")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        version = f"-X {HELM_MODULE}/internal/version.version={HELM_VERSION}"
        flags = " ".join(["-s -w", version, *_kube_flags()])
        _run_go(
            ["install", "-trimpath", f"-ldflags={flags}", f"{HELM_MODULE}/cmd/helm@{HELM_VERSION}"],
            {"GOBIN": scratch},
            f"go install {HELM_MODULE}/cmd/helm@{HELM_VERSION}",
            background=background,
        )
        Path(scratch, "helm").replace(target)
    if not _helm_works(target):
        raise ToolError(f"{target} was built but `helm version` does not say {HELM_VERSION}")
    return target


def _kube_flags() -> list[str]:
    major, minor = HELM_KUBE_VERSION
    return [
        f"-X {HELM_MODULE}/pkg/{package}.k8sVersion{part}={value}"
        for package in ("chartutil", "lint/rules")
        for part, value in (("Major", major), ("Minor", minor))
    ]


def ensure_service_monitor_crd(cache: Path | None = None) -> Path:
    """The Prometheus Operator's ServiceMonitor CustomResourceDefinition (YAML), from its Go
    module at the pinned version, kept in the cache. Idempotent.

    Raises ToolError when the module cannot be downloaded or lacks the file."""
    target = tools_dir(cache) / f"servicemonitors-{PROMETHEUS_OPERATOR_VERSION}.yaml"
    if target.is_file():
        return target
    module = f"{PROMETHEUS_OPERATOR_MODULE}@{PROMETHEUS_OPERATOR_VERSION}"
    answer = json.loads(_run_go(["mod", "download", "-json", module], {}, f"go mod download {module}"))
    source = Path(answer["Dir"]) / SERVICE_MONITOR_CRD
    if not source.is_file():
        raise ToolError(f"{module} has no {SERVICE_MONITOR_CRD}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    shutil.copyfile(source, partial)
    partial.replace(target)
    return target

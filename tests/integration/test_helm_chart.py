"""The Helm chart `deploy/helm/kafka-health`, with the pinned Helm (built once from the Go module
proxy): `helm lint --strict` and `helm template` for the default values and each value set in the
chart's `ci/` folder; every rendered manifest valid for the oldest and the newest Kubernetes the
chart supports (strict schemas, offline); the rendered monitor.yaml, rules and routing accepted by
`kafka-health config check`, `rules check` and `routes check` in the environment the pod would
have; and what the chart promises: a non-root, read-only container, probes on the daemon's real
health routes, secrets only by reference, values that cannot work refused with the fix.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.expose.web.app import router
from tests.fixtures.helm import CHART, NAMESPACE, Helm, daemon_container, of_kind, one, schema_problems

VALUE_SETS = {
    "default": [],
    "ha": ["ha-values.yaml"],
    "external-postgres": ["external-postgres-values.yaml"],
    "secured": ["secured-values.yaml"],
    "servicemonitor": ["servicemonitor-values.yaml"],
}
RENDERS_CONFIG = ("default", "ha", "external-postgres", "secured")
"""The value sets whose monitor.yaml the chart renders (the last one names a ConfigMap of the user's)."""
KUBE_VERSIONS = ("1.29", "1.37")
"""The oldest Kubernetes the chart supports (Chart.yaml's kubeVersion) and the newest with schemas."""
POD_IP = "10.0.0.7"
FAKE_DATABASE_URL = "postgresql+psycopg://kafka_health:from-the-secret@db.example:5432/kafka_health"
SECRET_CANARY = "s3cr3t-canary-value"


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_the_chart_lints_cleanly(helm: Helm, value_set: str) -> None:
    done = helm.lint(VALUE_SETS[value_set])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_every_rendered_manifest_is_valid_kubernetes(
    helm: Helm,
    custom_resource_schemas: dict[tuple[str, str], dict[str, Any]],
    value_set: str,
    kube_version: str,
) -> None:
    manifests = helm.render(VALUE_SETS[value_set])
    assert {"Deployment", "Service", "Job"} <= {m["kind"] for m in manifests}
    problems = [p for m in manifests for p in schema_problems(m, kube_version, custom_resource_schemas)]
    assert problems == []


def test_the_validation_catches_a_misspelled_field(
    helm: Helm, custom_resource_schemas: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """The strict schemas refuse what the API server would: a typo is not silently dropped."""
    manifests = helm.render(["servicemonitor-values.yaml"])
    deployment, monitor = one(manifests, "Deployment"), one(manifests, "ServiceMonitor")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {
        "httpGet": {"path": "/readyz"}
    }
    monitor["spec"]["endpoints"][0]["intervall"] = "30s"
    assert schema_problems(deployment, "1.37", custom_resource_schemas)
    assert schema_problems(monitor, "1.37", custom_resource_schemas)


def _write_config_maps(manifests: list[dict[str, Any]], root: Path) -> dict[str, Path]:
    """The rendered ConfigMaps' files under `root`, as the pod mounts them: mount path -> local dir."""
    container = daemon_container(manifests)
    volumes = {v["name"]: v for v in one(manifests, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    maps = {m["metadata"]["name"]: m for m in of_kind(manifests, "ConfigMap")}
    mounted: dict[str, Path] = {}
    for mount in container["volumeMounts"]:
        source = volumes[mount["name"]].get("configMap")
        if source is None:
            continue
        local = root / mount["mountPath"].strip("/")
        local.mkdir(parents=True)
        for name, text in maps[source["name"]]["data"].items():
            (local / name).write_text(text)
        mounted[mount["mountPath"]] = local
    return mounted


def _local(value: str, mounted: dict[str, Path]) -> str:
    for path, local in mounted.items():
        if value.startswith(path):
            return str(local) + value.removeprefix(path)
    return value


def pod_environment(manifests: list[dict[str, Any]], mounted: dict[str, Path]) -> dict[str, str]:
    """The daemon container's environment as Kubernetes would give it: secrets read from their
    Secrets (stand-ins here), the pod's IP, `$(VAR)` expanded, mounted paths made local."""
    env: dict[str, str] = {}
    for item in daemon_container(manifests)["env"]:
        source = item.get("valueFrom", {})
        if "secretKeyRef" in source:
            value = FAKE_DATABASE_URL if item["name"] == "DATABASE_URL" else SECRET_CANARY
        elif "fieldRef" in source:
            value = POD_IP
        else:
            value = re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], item["value"])
        env[item["name"]] = _local(value, mounted)
    return env


def _kafka_health(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_HEALTH_") and k != "DATABASE_URL"}
    command = [sys.executable, "-m", "monitor", *args]
    return subprocess.run(command, env=clean | env, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value_set", RENDERS_CONFIG)
def test_the_rendered_configuration_passes_the_checks(helm: Helm, value_set: str, tmp_path: Path) -> None:
    manifests = helm.render(VALUE_SETS[value_set])
    mounted = _write_config_maps(manifests, tmp_path)
    env = pod_environment(manifests, mounted)
    config = _local(daemon_container(manifests)["args"][-1], mounted)
    checked = _kafka_health(["config", "check", config], env, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "OK" in checked.stdout
    if "KAFKA_HEALTH_EVALUATE__RULES_DIR" in env:
        rules = _kafka_health(["rules", "check", env["KAFKA_HEALTH_EVALUATE__RULES_DIR"]], env, tmp_path)
        assert rules.returncode == 0, rules.stdout + rules.stderr
    if "KAFKA_HEALTH_ALERT__ROUTING_FILE" in env:
        routes = _kafka_health(
            ["routes", "check", "--routing", env["KAFKA_HEALTH_ALERT__ROUTING_FILE"]], env, tmp_path
        )
        assert routes.returncode == 0, routes.stdout + routes.stderr
        assert (Path(env["KAFKA_HEALTH_ALERT__ROUTING_FILE"]).parent / "owners.yaml").is_file()


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_the_pods_run_as_non_root_on_a_read_only_filesystem(helm: Helm, value_set: str) -> None:
    manifests = helm.render(VALUE_SETS[value_set])
    pods = [m["spec"]["template"]["spec"] for m in manifests if m["kind"] in ("Deployment", "Job")]
    assert len(pods) == 2
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] > 0
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"]["drop"] == ["ALL"]
            # What the daemon writes (Spark's scratch space) is an emptyDir, not the image.
            tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")
            assert "emptyDir" in next(v for v in pod["volumes"] if v["name"] == tmp["name"])
    container = daemon_container(manifests)
    env = {e["name"]: e.get("value") for e in container["env"]}
    state = next(m for m in container["volumeMounts"] if m["mountPath"] == env["KAFKA_HEALTH_VAR"])
    assert state["name"] == "state"


def test_the_probes_ask_the_daemons_health_routes(helm: Helm) -> None:
    container = daemon_container(helm.render())
    routes = {route.path for route in router.routes}  # type: ignore[attr-defined]
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    probes = {
        kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")
    }
    assert {kind: probe["path"] for kind, probe in probes.items()} == {
        "startupProbe": "/healthz",
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    assert {probe["path"] for probe in probes.values()} <= routes
    assert {probe["port"] for probe in probes.values()} == {"http"}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KAFKA_HEALTH_WEB__HOST"] == "0.0.0.0"
    assert int(env["KAFKA_HEALTH_WEB__PORT"]) == ports["http"]


def _references(value: Any) -> list[dict[str, Any]]:
    """Every secretKeyRef and Secret volume in a manifest."""
    if isinstance(value, list):
        return [ref for item in value for ref in _references(item)]
    if not isinstance(value, dict):
        return []
    own = [value[k] for k in ("secretKeyRef", "secret") if isinstance(value.get(k), dict)]
    return own + [ref for item in value.values() for ref in _references(item)]


def test_secrets_are_only_referenced(helm: Helm) -> None:
    manifests = helm.render(["ha-values.yaml", "secured-values.yaml"])
    assert of_kind(manifests, "Secret") == []
    container = daemon_container(manifests)
    by_name = {e["name"]: e for e in container["env"]}
    for name in ("DATABASE_URL", "KAFKA_HEALTH_WEB__IDENTITY__CSRF_SECRET", "SLACK_BOT_TOKEN",
                 "KAFKA_HEALTH_CLUSTERS__0__SECURITY__SASL_PASSWORD"):  # fmt: skip
        assert "value" not in by_name[name] and by_name[name]["valueFrom"]["secretKeyRef"]["name"]
    referenced = {ref.get("name") or ref.get("secretName") for m in manifests for ref in _references(m)}
    assert referenced == {
        "kafka-health-database", "kafka-health-web", "kafka-health-scram", "kafka-health-tls",
        "kafka-health-receivers",
    }  # fmt: skip
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/kafka-health/tls"]["readOnly"] is True


@pytest.mark.parametrize(
    ("sets", "says"),
    [
        (['config.monitor.clusters=[{"name":"k","bootstrap_servers":["k:9092"],"security":'
          f'{{"sasl_password":"{SECRET_CANARY}"}}}}]'], "KAFKA_HEALTH_CLUSTERS__0__SECURITY__SASL_PASSWORD"),
        (['config.monitor.clusters=[{"name":"k","bootstrap_servers":["k:9092"]},{"name":"j","bootstrap_servers":'
          f'["j:9092"],"security":{{"sasl_oauthbearer_client_secret":"{SECRET_CANARY}"}}}}]'],
         "KAFKA_HEALTH_CLUSTERS__1__SECURITY__SASL_OAUTHBEARER_CLIENT_SECRET"),
        ([f'config.monitor.database={{"url":"postgresql://u:{SECRET_CANARY}@h/d"}}'], "database.existingSecret"),
        ([f'config.monitor.web={{"identity":{{"csrf_secret":"{SECRET_CANARY}"}}}}'], "web.csrfSecret"),
        ([f'config.monitor.push={{"remote_write":[{{"name":"c","url":"http://p","basic_auth_password":"{SECRET_CANARY}"}}]}}'],
         "secretEnv"),
        (["replicaCount=2"], "web.csrfSecret.existingSecret"),
        (['podDisruptionBudget={"enabled":true,"minAvailable":1}'], "block every node drain"),
        (['database={"existingSecret":"","urlKey":"url"}'], "existingSecret"),
        (['spark={"master":"local[*] --conf x"}'], "spark"),
        (['spark={"master":"k8s://https://kubernetes.default.svc"}'], "serviceAccount.automountToken: true"),
        (['image={"repository":"kafka-health","pullPolicy":"Sometimes"}'], "pullPolicy"),
        (['podSecurityContext={"runAsNonRoot":false}'], "runAsNonRoot"),
        (['securityContext={"allowPrivilegeEscalation":true}'], "allowPrivilegeEscalation"),
        (['secretEnv=[{"name":"X","secretName":"Not_A_Name","key":"k"}]'], "secretName"),
        (['replicas=2'], "replicas"),
        (['serviceMonitor={"enabled":true,"interval":"soon"}'], "interval"),
    ],
)  # fmt: skip
def test_values_that_cannot_work_are_refused_with_the_fix(helm: Helm, sets: list[str], says: str) -> None:
    done = helm.template(sets=sets)
    assert done.returncode != 0, done.stdout
    assert says in done.stderr
    assert SECRET_CANARY not in done.stderr + done.stdout


def test_two_replicas_share_the_work_behind_a_disruption_budget(helm: Helm) -> None:
    manifests = helm.render(["ha-values.yaml", "servicemonitor-values.yaml"])
    deployment, budget = one(manifests, "Deployment"), one(manifests, "PodDisruptionBudget")
    assert deployment["spec"]["replicas"] == 2
    assert budget["spec"]["minAvailable"] == 1
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    service, monitor = one(manifests, "Service"), one(manifests, "ServiceMonitor")
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http", "/metrics")
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
    # The schema is upgraded once, by a hook Job, not by each replica.
    job = one(manifests, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "migrate"]
    job_labels = job["spec"]["template"]["metadata"]["labels"]
    selectors = [deployment["spec"]["selector"]["matchLabels"], budget["spec"]["selector"]["matchLabels"]]
    assert not any(
        selector.items() <= job_labels.items() for selector in [*selectors, service["spec"]["selector"]]
    )


def test_spark_runs_in_the_pod_by_default_and_on_a_cluster_when_named(helm: Helm) -> None:
    local = {e["name"]: e for e in daemon_container(helm.render())["env"]}
    assert local["KAFKA_HEALTH_SPARK__MASTER"]["value"] == "local[*]"
    assert "KAFKA_HEALTH_SPARK__CONF__spark.driver.host" not in local
    remote = {e["name"]: e for e in daemon_container(helm.render(["servicemonitor-values.yaml"]))["env"]}
    assert remote["KAFKA_HEALTH_SPARK__MASTER"]["value"] == "spark://spark-master.spark.svc:7077"
    assert remote["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert remote["KAFKA_HEALTH_SPARK__CONF__spark.driver.host"]["value"] == "$(POD_IP)"


def test_configuration_from_existing_config_maps(helm: Helm) -> None:
    manifests = helm.render(["servicemonitor-values.yaml"])
    assert of_kind(manifests, "ConfigMap") == []
    volumes = {
        v["name"]: v["configMap"]["name"]
        for v in one(manifests, "Deployment")["spec"]["template"]["spec"]["volumes"]
        if "configMap" in v
    }
    assert volumes == {
        "config": "kafka-health-config",
        "rules": "kafka-health-rules",
        "alerting": "kafka-health-alerting",
    }


def test_a_changed_configuration_rolls_the_pods(helm: Helm) -> None:
    def stamp(*sets: str) -> str:
        deployment = one(helm.render(sets=sets), "Deployment")
        return str(deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"])

    assert stamp() == stamp()
    assert stamp() != stamp('config.monitor={"clusters":[{"name":"other","bootstrap_servers":["o:9092"]}]}')


def test_the_chart_and_its_values_schema_agree() -> None:
    """Every top-level value in values.yaml is described by values.schema.json (which refuses
    unknown keys), so a documented value is never refused."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(values) <= set(schema["properties"])
    assert schema["additionalProperties"] is False

"""What `kafka-health demo` sets up beyond the stack, so every page has something to show.

- Alerts go to inbox files (`deploy/demo-routing.yaml`) unless `alert.routing_file` is set; then
  the shipped example `alert_rules/owners.yaml` is the demo's ownership file, unless
  `alert.owners_file` is set (a deployment that names no ownership file has none).
- The retention button works without a sign-in proxy: unless the configuration sets
  `web.identity`, the demo runs in the identity's development mode as `DEMO_USER` of team
  `payments`, which owns the `payments...` topics in `alert_rules/owners.yaml`. Every page and API
  answer then says it is in development mode; it is never a default outside the demo.
- A topic owned by that team, `DEMO_TOPIC` (retention.ms 1 day), is created on the local cluster
  when missing, so the button has a topic to raise; the workload sets its min.insync.replicas
  to 2 and produces to it.
- The workload (`monitor/devtools/workload/`) plays client applications on the local cluster:
  producers, consumer groups that keep up, fall behind, stop, stall and rewind, topics whose
  retention cuts their history, and two broker stops. `start_workload` starts it.
- Metadata and log directories are collected more often than by default (see `DEMO_INTERVALS`).
"""

from __future__ import annotations

from collections.abc import Callable

from monitor.core.errors import KafkaRequestError, KafkaUnavailableError
from monitor.core.owners import default_owners_path
from monitor.core.settings import IdentityConfig, Intervals, ProbeConfig, RemoteWriteTarget, Settings
from monitor.devtools.kafka_cluster import DevKafkaCluster
from monitor.devtools.kafka_node import HOST
from monitor.devtools.paths import project_root
from monitor.devtools.workload import Workload, demo_plan
from monitor.kafka.admin import KafkaAdmin

DEMO_USER = "demo-user"
DEMO_TEAMS = ("payments",)
DEMO_TOPIC = "payments.orders"
DEMO_TOPIC_CONFIGS = {"retention.ms": str(86_400_000)}
# The default intervals collect metadata every minute and log directories every two: a broker
# stopped a minute into the demo would show up in the data a minute later, and the replication
# rules' `for:` (1 to 5 minutes) comes on top, past the five minutes the demo has to show every
# incident. Used only when the configuration leaves `intervals` at its defaults.
DEMO_INTERVALS = Intervals(metadata_seconds=15, log_dirs_seconds=30)


def demo_settings(settings: Settings) -> Settings:
    """`settings` with the demo's routing, intervals, end-to-end probe and development-mode
    identity, where not configured."""
    updates: dict[str, object] = {}
    if settings.alert.routing_file is None:
        # The demo names the shipped example owners (team payments) itself: a deployment that
        # names none has no owners at all (`core.owners.owners_file`).
        routing = {"routing_file": project_root() / "deploy" / "demo-routing.yaml"}
        if settings.alert.owners_file is None:
            routing["owners_file"] = default_owners_path()
        updates["alert"] = settings.alert.model_copy(update=routing)
    if settings.intervals == Intervals():
        updates["intervals"] = DEMO_INTERVALS
    if settings.collect.probe == ProbeConfig():
        # The demo shows the end-to-end probe: on, on its own dev cluster only.
        updates["collect"] = settings.collect.model_copy(update={"probe": ProbeConfig(enabled=True)})
    if settings.web.identity == IdentityConfig():
        identity = IdentityConfig(
            mode="development", development_user=DEMO_USER, development_teams=list(DEMO_TEAMS)
        )
        updates["web"] = settings.web.model_copy(update={"identity": identity})
    return settings.model_copy(update=updates) if updates else settings


def with_prometheus_push(settings: Settings, url: str) -> Settings:
    """`settings` pushing to the demo's Prometheus by remote write too (every 15 s), labelled
    `source="remote_write"` so its series stand beside the scraped ones."""
    target = RemoteWriteTarget(
        name="demo-prometheus", url=url, interval_seconds=15, external_labels={"source": "remote_write"}
    )
    push = settings.push.model_copy(update={"remote_write": [*settings.push.remote_write, target]})
    return settings.model_copy(update={"push": push})


def ensure_demo_topic(settings: Settings, report: Callable[[str], None]) -> None:
    """Create `DEMO_TOPIC` on the first configured cluster when it is missing. A failure is
    reported and the demo goes on: the topic only gives the button something to press."""
    if not settings.clusters:
        return
    cluster = settings.clusters[0]
    admin = KafkaAdmin(cluster)
    admin.start()
    try:
        if DEMO_TOPIC in admin.list_topic_names(include_internal=False):
            return
        replicas = min(3, settings.dev_kafka.nodes)
        admin.create_topic(DEMO_TOPIC, partitions=3, replication_factor=replicas, configs=DEMO_TOPIC_CONFIGS)
        report(f"created the demo topic {DEMO_TOPIC} on {cluster.name} (owned by team payments)")
    except (KafkaRequestError, KafkaUnavailableError) as exc:
        report(f"could not create the demo topic {DEMO_TOPIC}: {exc}")
    finally:
        admin.close()


def web_url(settings: Settings) -> str:
    return f"http://{settings.web.host}:{settings.web.port}"


def start_workload(settings: Settings, cluster: DevKafkaCluster, report: Callable[[str], None]) -> Workload:
    """Start the demo's workload on the local `cluster`. Its pages are those of the configured
    cluster that points at it (else the first). The brokers it stops are not among that cluster's
    bootstrap servers, so the monitor keeps reaching the cluster through the one left."""
    local = cluster.bootstrap_servers.split(",")
    watching = next((c for c in settings.clusters if set(c.bootstrap_servers) & set(local)), None)
    name = (watching or settings.clusters[0]).name if settings.clusters else "local"
    bootstrap = set(watching.bootstrap_servers) if watching else set()
    spare = [n for n in cluster.node_ids if f"{HOST}:{cluster.broker_port(n)}" not in bootstrap]
    spare = spare or cluster.node_ids[1:]
    plan = demo_plan(
        web_url=web_url(settings), cluster=name, nodes=len(cluster.node_ids), stop_brokers=spare[-2:]
    )
    workload = Workload(plan, cluster.bootstrap_servers, report, cluster.stop_node, keep_topics=[DEMO_TOPIC])
    workload.start()
    return workload

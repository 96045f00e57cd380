"""What `kafka-health demo` sets up beyond the stack, so every page has something to show.

- Alerts go to inbox files (`deploy/demo-routing.yaml`) unless `alert.routing_file` is set.
- The retention button works without a sign-in proxy: unless the configuration sets
  `web.identity`, the demo runs in the identity's development mode as `DEMO_USER` of team
  `payments`, which owns the `payments...` topics in `alert_rules/owners.yaml`. Every page and API
  answer then says it is in development mode; it is never a default outside the demo.
- A topic owned by that team, `DEMO_TOPIC` (retention.ms 1 day), is created on the local cluster
  when missing, so the button has a topic to raise.
"""

from __future__ import annotations

from collections.abc import Callable

from monitor.config import IdentityConfig, Settings
from monitor.devtools.paths import project_root
from monitor.errors import KafkaRequestError, KafkaUnavailableError
from monitor.kafka.admin import KafkaAdmin

DEMO_USER = "demo-user"
DEMO_TEAMS = ("payments",)
DEMO_TOPIC = "payments.orders"
DEMO_TOPIC_CONFIGS = {"retention.ms": str(86_400_000)}


def demo_settings(settings: Settings) -> Settings:
    """`settings` with the demo's routing and its development-mode identity, where not configured."""
    updates: dict[str, object] = {}
    if settings.alert.routing_file is None:
        updates["alert"] = settings.alert.model_copy(
            update={"routing_file": project_root() / "deploy" / "demo-routing.yaml"}
        )
    if settings.web.identity == IdentityConfig():
        identity = IdentityConfig(
            mode="development", development_user=DEMO_USER, development_teams=list(DEMO_TEAMS)
        )
        updates["web"] = settings.web.model_copy(update={"identity": identity})
    return settings.model_copy(update=updates) if updates else settings


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

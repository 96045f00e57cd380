"""Config: `alert_rules/routing.yaml` (settings, receivers, the route tree, inhibition rules) and
`alert_rules/owners.yaml` (teams owning topics and groups by pattern), both strict and checkable
without running the monitor (`kafka-health routes check`).

`schema.py` is what the files may hold, `load.py` checks and resolves them, `routing.py` is the
result (`Routing`), pure. The receivers' own settings are checked by their registry
(`monitor.alert.receivers.registry`).
"""

from monitor.alert.config.load import (
    check_routing,
    console_inboxes,
    default_routing_paths,
    load_routing,
    routing_paths,
)
from monitor.alert.config.routing import Routing, RoutingSettings

__all__ = [
    "Routing",
    "RoutingSettings",
    "check_routing",
    "console_inboxes",
    "default_routing_paths",
    "load_routing",
    "routing_paths",
]

"""The demo's workload generator: producers at different rates and consumer groups that behave
differently (healthy, slow, stopped, stalled, rewinding), topics whose retention cuts their history
or deletes what a group has not read, and a timeline that stops brokers. `plan` says what,
`runner` plays it, `clients` are the producer and consumer threads."""

from monitor.devtools.workload.plan import Behaviour, Plan, demo_plan
from monitor.devtools.workload.runner import Workload

__all__ = ["Behaviour", "Plan", "Workload", "demo_plan"]

"""Alert stage: findings -> alerts -> muted or not -> groups per receiver -> notifications -> delivery.

The flow, as Alertmanager lays it out:

- `config/`     the routing and ownership files: schema, checks, the resolved `Routing`
- `cycle.py`    one alert cycle, its steps in order; `state.py` holds every statement it runs
- `alerts.py`   step 1, alerts from findings
- `mute/`       step 2, silences and inhibition (and the impact an inhibiting alert carries)
- `dispatch/`   steps 3 and 4, the route tree, groups, timing, escalation, acknowledgement
- `notify/`     the durable outbox, the sender, retries decided from typed failure reasons
- `receivers/`  one registry of receiver kinds, a module per kind
- `stage.py`    the stage as an app component: the cycle and the sender on their schedules
"""

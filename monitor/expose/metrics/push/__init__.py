"""Push the state metrics to where autoscalers and long-term storage read them: Prometheus
remote write and Amazon CloudWatch. Off by default (`push:` in the settings); each target picks
its clusters and metrics, and runs on its own interval as a scheduler job `push:<name>`.

The series pushed are the ones `/metrics` serves (same names, labels and values: the catalogue's),
read once per push from the same state; a target that is away costs its own job only.
"""

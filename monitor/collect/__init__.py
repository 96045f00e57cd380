"""Collect stage: samples Kafka clusters on a schedule and writes them to the store.

`stage` (the app component: one `ClusterCollector` per cluster, leases, the buffered writer) runs
every job registered in `jobs` (one module each: metadata, configs, offsets, log dirs) with the
`context` of its cluster. The offsets job's pure steps are in `lag` and `interpolate`, what it
remembers across cycles and its one store read per cycle in `recall`. Kafka is reached through
the protocols of `monitor.kafka.protocol` only.
"""

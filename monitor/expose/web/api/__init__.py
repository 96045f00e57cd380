"""The HTTP API: clusters, topics, groups and findings (`clusters`), alerts (`alerts`), the
retention button (`retention`) and the Burrow v3-compatible endpoints (`burrow`)."""

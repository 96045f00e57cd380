"""Expose stage: web UI, HTTP API, /metrics, SQL views and CLI reports. Read-only on the samples."""

"""Collect stage: samples Kafka clusters on a schedule and writes them to the store."""

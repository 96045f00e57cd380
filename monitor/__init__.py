"""Kafka health monitor: collect -> store -> evaluate -> alert -> act -> expose."""

__version__ = "0.1.0"

"""Prometheus `/metrics`: the catalogue of every metric (`catalogue`), the set-based SQL that reads
them (`state_queries`) and the collector that serves them (`prometheus`)."""

"""Evaluate stage: Spark jobs that read samples over JDBC and write derived metrics and findings."""

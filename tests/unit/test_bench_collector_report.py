"""The offsets collector benchmark's report of issue 19's targets (bench/collector_report.py): which
figures each verdict takes, and that the table shows them."""

from __future__ import annotations

from typing import Any

from bench.collector_report import report, stream_table, stream_verdicts


def _size(
    first: float, median: float, p95: float, cpu: float, steady: list[float], peak: float
) -> dict[str, Any]:
    counts = {"groups": 500, "group_partitions": 100_000, "lagging_group_partitions": 50_000, "exact": 50_000}
    run = {"status": "ok", "counts": counts, "error": None}
    return {
        "partitions": 10_000,
        "kafka_nodes": 3,
        "groups": 500,
        "group_partitions_committed": 100_000,
        "records": 1,
        "loadavg_before": 1.0,
        "cycles": [
            {"cycle": 1, "asked": False, "seconds": 1.9, "run": run, "steps": {}, "loadavg": 1.0},
            {"cycle": 2, "asked": True, "seconds": 6.0, "run": run, "steps": {}, "loadavg": 1.0},
            {"cycle": 3, "asked": False, "seconds": 1.5, "run": run, "steps": {}, "loadavg": 1.0},
        ],
        "cold": {"first_complete_seconds": first, "filled_seconds": 9.0},
        "steady": {
            "cpu_per_minute": cpu,
            "cycles": steady,
            "commit_visible": {"probes": 40, "unseen": 0, "median_seconds": median, "p95_seconds": p95},
        },
        "memory": {"peak_mb": peak, "rss_mb": peak},
        "metadata": {"seconds": 0.5},
        "setup": {"kafka_up": 1, "topics": 1, "produce": 1, "commits": 1},
        "verification": {
            "exact_checked": 1,
            "exact_wrong": 0,
            "partitions_checked": 1,
            "partitions_wrong": 0,
        },
    }


def test_every_target_met_and_one_missed_are_told_apart() -> None:
    met = stream_verdicts([_size(2.1, 0.4, 1.2, 2.5, [1.1, 1.3], 250)])
    missed = stream_verdicts([_size(2.1, 0.4, 2.6, 2.5, [1.1, 2.3], 250)])

    assert [m for _, m, _ in met] == [True, True, True, True, True]
    assert [m for _, m, _ in missed] == [True, False, True, False, True]
    assert "p95 2.60 s" in missed[1][2] and "2.30 s" in missed[3][2]


def test_without_the_100k_case_every_target_is_not_measured() -> None:
    small = _size(1.0, 0.1, 0.2, 0.5, [0.2], 120) | {"group_partitions_committed": 10_000}

    assert {m for _, m, _ in stream_verdicts([small])} == {None}


def test_the_table_and_the_report_show_the_figures() -> None:
    size = _size(2.1, 0.4, 1.2, 2.5, [1.1, 1.3], 250)
    table = "\n".join(stream_table([size]))
    assert (
        "| 10,000 | 100,000 | 2.10 s | 9.00 s | 0.40 s | 1.20 s | 40 (0) | 2.50 | 1.10, 1.30 | 250 |" in table
    )
    info = {
        "cpus": 2, "memory": "1 GiB", "system": "Linux", "kafka": "4.1", "postgresql": "15", "python": "3.11",
        "confluent_kafka": "2", "librdkafka": "2", "date": "today", "loadavg_start": 1.0,
    }  # fmt: skip
    text = report(info, {"request_timeout_seconds": 10.0}, [size])
    assert "### Cold start, commit latency and steady cost" in text

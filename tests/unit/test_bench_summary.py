"""The benchmarks' pure parts: latency percentiles, the results table assembled from the scripts'
JSON documents, the README's table between markers, and the plots drawn from them."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bench import run, summary
from bench.web import percentile, summarize

# -- percentiles ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1.0, 2.0, 3.0, 4.0], 50, 2.5),
        ([1.0, 2.0, 3.0, 4.0], 0, 1.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([4.0, 1.0, 3.0, 2.0], 50, 2.5),  # order does not matter
        ([7.0], 99, 7.0),
        ([float(n) for n in range(1, 101)], 95, 95.05),
        ([float(n) for n in range(1, 101)], 99, 99.01),
        ([10.0, 20.0], 25, 12.5),
    ],
)
def test_percentile_interpolates_between_ranks(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_of_nothing_is_nan_and_q_is_checked() -> None:
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError, match="percentile"):
        percentile([1.0], 101)


def test_summarize_counts_errors_in_the_rate_but_not_in_the_latency() -> None:
    result = summarize([0.010, 0.020, 0.030, 0.040], errors=1, seconds=0.5)
    assert result["requests"] == 5
    assert result["errors"] == 1
    assert result["rps"] == pytest.approx(10.0)
    assert result["p50_ms"] == pytest.approx(25.0)
    assert result["max_ms"] == pytest.approx(40.0)
    assert math.isnan(summarize([], errors=3, seconds=1.0)["p95_ms"])


# -- the results table ----------------------------------------------------------------------------

MACHINE = {"cpus": 2, "memory": "23.5 GiB", "system": "Linux x86_64", "python": "3.11.7",
           "postgresql": "15.18", "date": "2026-11-22 06:00 UTC", "loadavg_start": 1.5}  # fmt: skip


def _web_result(kind: str, path: str, concurrency: int, p95: float) -> dict[str, Any]:
    return {"kind": kind, "path": path, "concurrency": concurrency, "requests": 50, "errors": 0, "seconds": 1.0,
            "rps": 50.0, "p50_ms": p95 / 2, "p95_ms": p95, "p99_ms": p95, "max_ms": p95, "bytes": 100,
            "error_kinds": [], "cut_short": False}  # fmt: skip


DOCUMENTS: dict[str, dict[str, Any]] = {
    "ingest": {
        "machine": MACHINE,
        "cycles": 3,
        "sizes": [
            {
                "rows": 10_006,
                "partitions": 1668,
                "group_offsets": 6672,
                "observations": 1668,
                "median_s": 0.33,
                "median_rate": 30_000.0,
                "best_rate": 32_000.0,
                "replay_rate": 20_000.0,
            },
            {
                "rows": 100_002,
                "partitions": 16667,
                "group_offsets": 66668,
                "observations": 16667,
                "median_s": 2.5,
                "median_rate": 40_000.0,
                "best_rate": 41_000.0,
                "replay_rate": 25_000.0,
            },
        ],
    },
    "alerts": {
        "machine": MACHINE,
        "cycles": [
            {"findings": 1000, "first": 0.09, "notify": 0.3, "steady": 0.08, "notifications": 8},
            {"findings": 10000, "first": 0.87, "notify": 6.2, "steady": 0.63, "notifications": 8},
        ],
        "sender": {"notifications": 2000, "sent": 2000, "seconds": 6.5, "rate": 307.0},
        "latency": {"rounds": 20, "median_ms": 11.0, "max_ms": 15.0},
    },
    "silences": {
        "machine": MACHINE,
        "many": [
            {
                "silences": 100,
                "alerts": 10000,
                "first": 0.5,
                "notify": 1.2,
                "steady": 0.4,
                "matching": 0.05,
                "silenced": 900,
                "firing": 10000,
                "baseline": {"first": 0.45, "notify": 1.1, "steady": 0.35},
            },
            {
                "silences": 1000,
                "alerts": 10000,
                "first": 0.7,
                "notify": 1.5,
                "steady": 1.1,
                "matching": 0.2,
                "silenced": 5700,
                "firing": 10000,
                "baseline": {"first": 0.45, "notify": 1.1, "steady": 0.35},
            },
        ],
        "costly": {
            "alerts": 10000,
            "costly": 20,
            "others": 30,
            "before": 40.0,
            "at_once_unbounded": 2.5,
            "after": 0.08,
            "cycle_after": 0.6,
        },
    },
    "collector": {
        "machine": {**MACHINE, "date": "2026-11-22 03:31 UTC"},
        "sizes": [
            {
                "partitions": 1000,
                "groups": 500,
                "measured_at": "2026-11-22 02:55 UTC",
                "cycles": [
                    {"cycle": 1, "seconds": 5.0, "loadavg": 3.0},
                    {"cycle": 2, "seconds": 3.0, "loadavg": 4.0},
                ],
                "runs": [{"seconds": [5.0, 3.0]}, {"seconds": [7.0, 4.0]}],
                "memory": {"peak_mb": 150.0},
            },
            {
                "partitions": 10000,
                "groups": 500,
                "measured_at": "2026-11-22 03:34 UTC",
                "cycles": [
                    {"cycle": 1, "seconds": 12.0, "loadavg": 2.0},
                    {"cycle": 2, "seconds": 4.0, "loadavg": 2.0},
                ],
                "memory": {"peak_mb": 240.0},
            },
            {"partitions": 30000, "groups": 500, "error": "Kafka did not start"},
        ],
    },
    "evaluate": {
        "machine": {**MACHINE, "date": "2026-11-22 06:51 UTC"},
        "sizes": [
            {
                "rows": 100_000,
                "runs": [
                    {
                        "wall_s": 12.0,
                        "seconds": {"read": 2.0, "compute": 8.0, "write": 2.0},
                        "loadavg_before": 1.0,
                    }
                ],
            },
            {
                "rows": 1_000_000,
                "runs": [
                    {
                        "wall_s": 70.0,
                        "seconds": {"read": 8.0, "compute": 50.0, "write": 12.0},
                        "loadavg_before": 2.0,
                    },
                    {
                        "wall_s": 50.0,
                        "seconds": {"read": 6.0, "compute": 36.0, "write": 8.0},
                        "loadavg_before": 2.0,
                    },
                    {
                        "wall_s": 55.0,
                        "seconds": {"read": 7.0, "compute": 40.0, "write": 8.0},
                        "loadavg_before": 2.5,
                    },
                ],
            },
        ],
    },
    "web": {
        "machine": MACHINE,
        "sizes": [
            {
                "topics": t,
                "measured_at": "2026-11-22 07:00 UTC",
                "loadavg_before": 2.0,
                "results": [_web_result("page", "/", c, 10.0 * t / 100 * c) for c in (4, 16)]
                + [_web_result("api", "/api/v1/clusters", c, 5.0 * c) for c in (4, 16)]
                + [_web_result("api", "/api/v1/findings", c, 8.0 * c) for c in (4, 16)],
            }
            for t in (100, 1000)
        ],
    },
    "push": {
        "series": 100_000,
        "measured_at": "2026-11-22 07:10 UTC",
        "loadavg_before": 3.0,
        "cycles": [
            {"cycle": 1, "sent": 100_000, "seconds": 6.2, "stored_series": 100_000},
            {"cycle": 2, "sent": 100_000, "seconds": 16.5, "stored_series": 99_000},
        ],
    },
    "fresh-visible": {
        "group_partitions": 100_000,
        "measured_at": "2026-11-22 07:30 UTC",
        "loadavg_before": [2.0, 1.5, 1.0],
        "seconds": {"api": [0.2, 0.1, 0.3, 1.5], "burrow": [1.2, 1.4, 0.9]},
        "unseen": {"api": 0, "burrow": 1},
    },
    "detect": {
        "date": "2026-11-22",
        "machine": "vm (2 cores)",
        "load_average": [1.5, 2.0, 2.5],
        "idle_seconds": 120,
        "idle_cpu_seconds_per_minute": 5.0,
        "evaluations": 4,
        "evaluation_median_seconds": 1.5,
        "evaluation_p95_seconds": 4.5,
        "rules": [
            {"rule": "BrokerDown", "for_seconds": 60, "to_firing": 70.0, "to_notice": 75.0},
            {"rule": "DataLossOccurred", "for_seconds": 0, "to_firing": 12.0, "to_notice": 21.0},
            {"rule": "PartitionOffline", "for_seconds": 60, "to_firing": None, "to_notice": None},
        ],
    },
}


ORDER = ["collector", "ingest", "evaluate", "alerts", "silences", "web", "push", "fresh-visible", "detect"]
"""The benchmarks in the table's order (the issues')."""


def write_documents(directory: Path) -> Path:
    for name, doc in DOCUMENTS.items():
        (directory / f"{name}.json").write_text(json.dumps(doc))
    (directory / "unrelated.json").write_text("{}")
    return directory


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return write_documents(tmp_path)


@pytest.fixture(scope="module")
def summarized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, list[Path]]:
    """The results directory, the summary's text and the plots of one `run.summarize`, shared by
    the tests of what it writes: drawing the plots takes seconds."""
    results = write_documents(tmp_path_factory.mktemp("results"))
    text, written = run.summarize(results, {"ingest": "ok (40 s)"}, results / "plots")
    return results, text, written


def _row(table: list[summary.Row], benchmark: str, size: float, cost: str) -> summary.Row:
    [row] = [r for r in table if r.benchmark == benchmark and r.size == size and r.cost.startswith(cost)]
    return row


def test_every_benchmark_document_is_read_in_the_issue_order(results: Path) -> None:
    documents = summary.load(results)
    assert list(documents) == ORDER
    table = summary.rows(documents)
    assert list(dict.fromkeys(r.benchmark for r in table)) == list(documents)


def test_collector_rows_take_the_median_over_runs_and_check_the_targets(results: Path) -> None:
    table = summary.rows(summary.load(results))
    cold = _row(table, "collector", 1000, "offsets cycle s (cold)")
    assert cold.value == 6.0  # median of the runs' 5.0 and 7.0
    assert cold.met is None  # the 10 s target is for 10k partitions
    assert cold.measured == "2026-11-22 02:55 UTC"
    assert cold.load == 4.0  # the highest of the size's cycles
    at_target = _row(table, "collector", 10000, "offsets cycle s (cold)")
    assert (at_target.value, at_target.met) == (12.0, False)
    assert _row(table, "collector", 10000, "offsets cycle s (warm").met is True
    assert _row(table, "collector", 10000, "collector peak RSS MB").met is True
    failed = _row(table, "collector", 30000, "offsets cycle s")
    assert failed.value is None
    assert "Kafka did not start" in failed.note


def test_evaluate_row_is_the_median_run_against_the_30_s_target(results: Path) -> None:
    table = summary.rows(summary.load(results))
    row = _row(table, "evaluate", 1_000_000, "evaluation s")
    assert row.value == 55.0
    assert row.met is False
    assert row.target == "<= 30 s at 1M"
    assert row.note == "read 7.0, compute 40.0, write 8.0"
    assert _row(table, "evaluate", 100_000, "evaluation s").met is None


def test_an_evaluate_size_merged_from_an_earlier_run_keeps_its_date(results: Path) -> None:
    documents = summary.load(results)
    documents["evaluate"]["sizes"][0]["measured"] = {"date": "2026-11-20 09:00 UTC", "driver_memory": "4g"}
    table = summary.rows(documents)
    assert _row(table, "evaluate", documents["evaluate"]["sizes"][0]["rows"], "evaluation s").measured == (
        "2026-11-20 09:00 UTC"
    )
    assert (
        _row(table, "evaluate", 1_000_000, "evaluation s").measured
        == documents["evaluate"]["machine"]["date"]
    )


def test_alert_rows_take_the_slowest_cycle_and_the_sender_rate(results: Path) -> None:
    table = summary.rows(summary.load(results))
    cycle = _row(table, "alerts", 10000, "slowest alert cycle s")
    assert (cycle.value, cycle.met) == (6.2, False)
    assert _row(table, "alerts", 1000, "slowest alert cycle s").met is None
    sender = _row(table, "alerts", 2000, "sender notifications/s")
    assert (sender.value, sender.met) == (307.0, True)
    assert _row(table, "alerts", 1, "finding -> receiver ms").value == 11.0


def test_silence_rows_hold_the_cycles_matching_every_alert_to_1_s_at_1000_by_10k(results: Path) -> None:
    table = summary.rows(summary.load(results))
    cycle = _row(table, "silences", 1000, "alert cycle s")
    assert (cycle.value, cycle.met, cycle.target) == (1.1, False, "<= 1 s at 1,000 x 10k")
    assert cycle.note == "first 0.70, steady 1.10, notifying 1.50; without silences 0.45, 0.35, 1.10"
    assert (
        _row(table, "silences", 100, "alert cycle s").met,
        _row(table, "silences", 100, "alert cycle s").target,
    ) == (
        None,
        "",
    ), "the target is for 1,000 silences"
    step = _row(table, "silences", 1000, "silence step s")
    assert (step.value, step.note) == (0.2, "5,700 of 10,000 firing alerts silenced")
    costly = _row(table, "silences", 20, "silence matching s (now)")
    assert (costly.value, costly.input) == (0.08, "20 costly + 30 silences, 10,000 alerts")
    assert costly.note.startswith("before 40.00 s (one silence after the other)")
    fast = summary.silences_rows(
        {**DOCUMENTS["silences"], "many": [{**DOCUMENTS["silences"]["many"][1], "steady": 0.9}]}
    )
    assert fast[0].met is True and summary.silences_rows({}) == []


def test_web_rows_give_the_slowest_endpoint_of_each_kind_at_the_highest_concurrency(results: Path) -> None:
    table = summary.rows(summary.load(results))
    web = [r for r in table if r.benchmark == "web"]
    assert [(r.size, r.cost) for r in web] == [
        (100, "page: slowest p95 ms"), (100, "api: slowest p95 ms"),
        (1000, "page: slowest p95 ms"), (1000, "api: slowest p95 ms"),
    ]  # fmt: skip
    api = _row(table, "web", 1000, "api")
    assert api.value == 8.0 * 16
    assert api.note.startswith("/api/v1/findings")
    assert api.input == "1,000 topics, 16 clients"


def test_summary_files_and_markdown(summarized: tuple[Path, str, list[Path]]) -> None:
    results, text, _ = summarized
    assert (results / "summary.md").read_text() == text
    doc = json.loads((results / "summary.json").read_text())
    assert doc["status"] == {"ingest": "ok (40 s)"}
    assert {"cpus", "memory", "date", "loadavg"} <= set(doc["machine"])
    # what the run had, completed by what is published (docs/bench/) for what it had not
    documents = summary.load(results, run.PUBLISHED)
    assert len(doc["rows"]) == len(summary.rows(documents, run.PUBLISHED / "summary.json"))
    assert "This run: ingest ok (40 s)." in text
    assert "| evaluate | 1,000,000 group-partitions | evaluation s (read + compute + write) | 55.0 |" in text
    assert "| failed |" in text


def test_missing_documents_give_no_rows(tmp_path: Path) -> None:
    assert summary.rows(summary.load(tmp_path)) == []


def test_a_benchmark_not_run_again_keeps_its_published_rows(results: Path, tmp_path: Path) -> None:
    everything = summary.rows(summary.load(results))
    published = tmp_path / "published" / "summary.json"
    published.parent.mkdir()
    published.write_text(json.dumps(summary.document(everything, {}, {})))
    (results / "web.json").unlink()
    (results / "evaluate.json").unlink()
    fresh = summary.load(results)
    fresh["ingest"]["sizes"][0]["median_rate"] = 1.0  # re-measured: its new figures win
    table = summary.rows(fresh, published)
    assert list(dict.fromkeys(r.benchmark for r in table)) == ORDER
    assert [r for r in table if r.benchmark in ("web", "evaluate")] == [
        r for r in everything if r.benchmark in ("web", "evaluate")
    ]
    assert [r for r in table if r.benchmark == "ingest"] != [r for r in everything if r.benchmark == "ingest"]
    assert summary.rows(summary.load(results), tmp_path / "absent.json") == summary.rows(
        summary.load(results)
    )


def test_push_row_is_the_slowest_cycle_against_one_15_s_cycle_at_100k(results: Path) -> None:
    row = _row(summary.rows(summary.load(results)), "push", 100_000, "remote write cycle s")
    assert (row.value, row.met, row.target) == (16.5, False, "<= 15 s at 100k")
    assert row.note == "2 cycles; 99,000 series read back from Prometheus"
    assert (row.measured, row.load) == ("2026-11-22 07:10 UTC", 3.0)
    smaller = summary.push_rows({**DOCUMENTS["push"], "series": 20_000})
    assert (smaller[0].target, smaller[0].met) == ("", None), "the target is for 100,000 series"
    assert summary.push_rows({"series": 5, "cycles": []})[0].note == "failed: no cycle"


def test_fresh_visible_rows_give_each_answers_median_against_1_s_at_100k_and_its_p95(results: Path) -> None:
    table = summary.rows(summary.load(results))
    api = _row(table, "fresh-visible", 100_000, "api: commit to visible s (median)")
    assert (api.value, api.met, api.target) == (0.25, True, "<= 1 s at 100k")
    assert (api.measured, api.load, api.note) == ("2026-11-22 07:30 UTC", 2.0, "4 commits")
    assert _row(table, "fresh-visible", 100_000, "api: commit to visible s (p95)").value == 1.5
    burrow = _row(table, "fresh-visible", 100_000, "burrow: commit to visible s (median)")
    assert (burrow.value, burrow.met) == (1.2, False)
    assert burrow.note == "3 commits, 1 not seen within 30 s"
    smaller = summary.fresh_visible_rows({**DOCUMENTS["fresh-visible"], "group_partitions": 10_000})
    assert (smaller[0].target, smaller[0].met) == ("", None), "the target is for 100,000 group-partitions"
    failed = summary.fresh_visible_rows({"group_partitions": 10, "seconds": {"api": []}})
    assert (failed[0].value, failed[0].note) == (None, "failed: no commit seen")


def test_detect_rows_give_the_time_beyond_for_and_the_idle_cost(results: Path) -> None:
    table = [r for r in summary.rows(summary.load(results)) if r.benchmark == "detect"]
    beyond = {r.input: (r.value, r.met) for r in table if r.cost.startswith("fault")}
    assert beyond == {
        "BrokerDown (for: 60 s)": (15.0, True),
        "DataLossOccurred (for: 0 s)": (21.0, False),
        "PartitionOffline (for: 60 s)": (None, None),
    }
    [unseen] = [r for r in table if r.input.startswith("PartitionOffline")]
    assert summary._value(unseen) == "not seen"
    idle = {r.cost: (r.value, r.met) for r in table if r.input.startswith("idle")}
    assert idle == {"daemon CPU-s per minute": (5.0, True), "evaluation s (median)": (1.5, False)}
    assert {(r.measured, r.load) for r in table} == {("2026-11-22", 1.5)}


def test_a_benchmark_without_results_is_read_from_its_published_json(results: Path, tmp_path: Path) -> None:
    published = tmp_path / "docs"
    published.mkdir()
    (published / "detect.json").write_text((results / "detect.json").read_text())
    (results / "detect.json").unlink()
    (results / "push.json").unlink()
    documents = summary.load(results, published)
    assert "detect" in documents and "push" not in documents
    assert summary.load(results)["web"] == summary.load(results, published)["web"], "results win"
    assert any(r.benchmark == "detect" for r in summary.rows(documents))


def test_every_bench_script_is_run_and_summarised() -> None:
    scripts = {path.name for path in (Path(run.__file__).parent).glob("*.py")}
    not_benchmarks = {
        "run.py",
        "summary.py",
        "plots.py",
        "__init__.py",
        "evaluate_profile.py",
        "plan_build.py",  # the seconds of building a plan, a profile beside it (docs/bench/plan-build.md)
        "demo_timeline.py",
        "fresh_lag_plan.py",  # a query plan at a size, not a timed run (docs/bench/fresh-lag.md)
        "fresh_metrics.py",  # the cost of the fresh /metrics offset lag at a size (docs/bench/fresh-lag.md)
        "collector_load.py",  # collector.py's load on the cluster
        "collector_report.py",  # collector.py's report and results files
        "phases.py",  # where evaluations of a kept database spend their time (docs/bench/evaluate-findings.md)
        "history_reads.py",  # two schema revisions of one database compared (docs/bench/history-reads.md)
    }
    assert {script for script, _, _ in run.BENCHMARKS.values()} == scripts - not_benchmarks
    assert set(summary.READERS) == set(run.BENCHMARKS)


def test_readme_table_is_replaced_between_the_markers() -> None:
    start, end = run.MARKERS
    readme = f"# Title\n\n{start}\nold table\n{end}\n\nmore\n"
    table = "## Benchmark results\n\nSummarised today.\n\n| a |\n|---|\n"
    assert (
        run.with_table(readme, table)
        == f"# Title\n\n{start}\nSummarised today.\n\n| a |\n|---|\n{end}\n\nmore\n"
    )
    assert run.with_table("no markers", table) == "no markers"


def test_quick_preset_and_ports() -> None:
    argv = run.command("web", quick=True, port_base=55600)
    assert argv[1].endswith("bench/web.py")
    assert argv[-2:] == ["--port", "55602"]
    assert "--sizes" in argv
    assert run.command("collector", quick=False, port_base=55600)[2:] == []


# -- plots ----------------------------------------------------------------------------------------


def test_plots_are_png_files(summarized: tuple[Path, str, list[Path]]) -> None:
    results, _, written = summarized
    assert all(path.parent == results / "plots" for path in written)
    assert sorted(p.name for p in written) == ["alerts.png", "collector.png", "evaluate.png", "ingest.png",
                                               "web.png"]  # fmt: skip
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert path.stat().st_size > 5_000


def test_a_web_endpoint_with_no_answer_in_time_shows_the_limit(tmp_path: Path) -> None:
    slow = {**_web_result("metrics", "/metrics", 16, float("nan")), "warmup_ms": 6200.0, "cut_short": True}
    doc = {"max_seconds": 8, "sizes": [{"topics": 10000, "measured_at": "now", "results": [slow]}]}
    (tmp_path / "web.json").write_text(json.dumps(doc))
    [row] = summary.rows(summary.load(tmp_path))
    assert row.value is None
    assert row.shown == "> 8,000"
    assert row.note == "/metrics: no answer within 8 s; one request alone took 6.2 s"
    assert "| > 8,000 |" in summary.markdown([row], run.machine({}), {})


def test_the_web_targets_apply_to_pages_and_lists_at_10k_topics(tmp_path: Path) -> None:
    fast = _web_result("api", "/api/v1/clusters/bench/topics", 16, 300.0)
    slow = {**_web_result("page", "/alerts", 16, 700.0), "bytes": 2_000_000}
    metrics = _web_result("metrics", "/metrics", 16, 900.0)
    doc = {"sizes": [{"topics": 10_000, "measured_at": "now", "results": [slow, fast, metrics]}]}
    (tmp_path / "web.json").write_text(json.dumps(doc))
    rows = {r.cost: r for r in summary.rows(summary.load(tmp_path))}
    assert (rows["page: slowest p95 ms"].target, rows["page: slowest p95 ms"].met) == (
        "<= 500 ms at 10k",
        False,
    )
    assert rows["api: slowest p95 ms"].met is True
    assert (rows["page: largest answer KB"].met, rows["page: largest answer KB"].note) == (False, "/alerts")
    assert rows["api: largest answer KB"].met is True
    assert rows["metrics: slowest p95 ms"].target == "" and rows["metrics: slowest p95 ms"].met is None


def test_metrics_rows_hold_one_scrape_and_four_scrapers_to_their_targets() -> None:
    def result(concurrency: int, p95: float) -> dict[str, object]:
        return {"kind": "metrics", "path": "/metrics", "concurrency": concurrency, "p50_ms": p95 / 2,
                "p95_ms": p95, "bytes": 21_000_000}  # fmt: skip

    doc = {
        "sizes": [
            {"topics": 1000, "measured_at": "m", "results": [result(1, 900.0)]},
            {"topics": 10000, "measured_at": "m", "results": [result(1, 310.0), result(4, 900.0)]},
        ]
    }
    rows = {(r.input, r.cost): r for r in summary.metrics_rows(doc)}
    small = rows[("1,000 topics, 1 scraper", "scrape p95 ms")]
    assert (small.target, small.met) == ("", None), "no target below 10,000 topics"
    alone = rows[("10,000 topics, 1 scraper", "scrape p95 ms")]
    assert (alone.value, alone.target, alone.met) == (310.0, "<= 300 ms at 10k", False)
    four = rows[("10,000 topics, 4 scrapers", "scrape p95 ms")]
    assert (four.target, four.met) == ("<= 1,000 ms at 10k", True)


def test_collector_rows_of_the_100k_case_are_held_to_its_targets() -> None:
    size = {
        "partitions": 10_000, "groups": 500, "group_partitions_committed": 100_000,
        "measured_at": "2026-11-26 09:21 UTC", "cycles": [{"seconds": 4.6, "loadavg": 3.8}, {"seconds": 2.6}],
        "memory": {"peak_mb": 297.0},
        "cold": {"first_complete_seconds": 5.2, "filled_seconds": 12.9},
        "steady": {"cpu_per_minute": 2.5, "cycles": [2.7, 1.9],
                   "commit_visible": {"median_seconds": 0.26, "p95_seconds": 0.69, "unseen": 0}},
    }  # fmt: skip
    rows = {row.cost: row for row in summary.collector_rows({"sizes": [size]})}
    assert (rows["first complete answer s"].value, rows["first complete answer s"].met) == (5.2, False)
    assert (rows["commit visible s (median)"].met, rows["steady CPU-s per minute"].met) == (True, True)
    assert (rows["steady offsets cycle s (slowest)"].value, rows["steady offsets cycle s (slowest)"].met) == (
        2.7,
        False,
    )
    assert (rows["collector peak RSS MB"].target, rows["collector peak RSS MB"].met) == (
        "<= 300 MB at 100k group-partitions", True,
    )  # fmt: skip
    smaller = {**size, "group_partitions_committed": 10_000}
    assert {row.met for row in summary.collector_rows({"sizes": [smaller]}) if "first" in row.cost} == {None}


def test_footprint_rows_hold_the_newest_run_to_the_whole_daemons_targets() -> None:
    def run_of(label: str, api: float, total: float, rss: float, size: int = 10_000) -> dict[str, Any]:
        return {
            "label": label, "measured_at": "2026-11-30 04:30 UTC", "loadavg_before": [9.5, 9, 9],
            "group_partitions": size,
            "complete": {"api": {"seconds": api}, "metrics": {"seconds": api + 1}},
            "steady": {
                "cpu_per_minute": {"python": 2.0, "jvm": 2.5, "postgres": total - 4.5, "total": total},
                "memory_mb": {"rss_max": rss, "pss_max": rss - 50},
            },
        }  # fmt: skip

    document = {"runs": [run_of("before", 700.0, 37.3, 2040.0), run_of("after", 4.0, 6.0, 1300.0)]}
    table = summary.footprint_rows(document)
    assert [(r.cost.split(",")[0], r.value, r.met) for r in table] == [
        ("start -> complete lag through the API s", 4.0, True),
        ("steady CPU-s per minute", 6.0, True),
        ("resident MB", 1300.0, False),
    ]
    assert {(r.input, r.measured, r.load) for r in table} == {
        ("10,000 group-partitions", "2026-11-30 04:30 UTC", 9.5)
    }
    assert "run `after`" in table[0].note and "PostgreSQL 1.5" in table[1].note
    assert summary.footprint_rows({"runs": []}) == []
    # A newer run for the start's figures only (`--steady 10`) measured no steady state.
    start_only = {**run_of("start-only", 3.0, 2.0, 900.0), "steady_seconds": 10}
    kept = summary.footprint_rows({"runs": [*document["runs"], start_only]})
    assert kept == table
    # A newer run of code no commit holds (a trial) is in the report, not in the table.
    trial = {**run_of("trial", 3.0, 2.0, 900.0), "commit": "c8e6938+changes"}
    assert summary.footprint_rows({"runs": [*document["runs"], trial]}) == table
    committed = {**trial, "commit": "c8e6938"}
    assert "run `trial`" in summary.footprint_rows({"runs": [*document["runs"], committed]})[0].note

    # Each size's newest run, against that size's targets: at 100,000 PostgreSQL <= 4 of the 12
    # CPU-s, 1.5 GB, and the lag served <= 1 s old; no start target.
    large = run_of("large", 60.0, 11.0, 1400.0, size=100_000)  # PostgreSQL 6.5 of the 11
    large["steady"]["lag_age_seconds"] = {"median": 0.8, "max": 2.0}
    rows = summary.footprint_rows({"runs": [large, *document["runs"]]})
    assert [r.input for r in rows] == ["10,000 group-partitions"] * 3 + ["100,000 group-partitions"] * 4
    assert [(r.cost.split(",")[0], r.target, r.met) for r in rows[3:]] == [
        ("start -> complete lag through the API s", "", None),
        ("steady CPU-s per minute", "<= 12 (PostgreSQL <= 4)", False),
        ("resident MB", "<= 1,500 MB", True),
        ("age of the lag served through the API s (median)", "<= 1 s", True),
    ]


def test_still_fleet_rows_hold_each_size_and_percentage_to_its_own_target() -> None:
    def size_of(rows: int, still: float | None, wall: float) -> dict[str, Any]:
        run = {
            "wall_s": wall, "seconds": {"compute": wall / 2, "write": 1.0}, "moved_groups": 10,
            "carried_groups": 490, "cpu_s": {"jvm": 3.0, "postgresql": 1.0}, "loadavg_before": 1.0,
        }  # fmt: skip
        size: dict[str, Any] = {"rows": rows, "groups": 500, "runs": [run], "measured": {"date": "d"}}
        if still is not None:
            size["still"] = still
        return size

    document = {
        "still": 1.0,  # the document's percentage: that of a size recorded before each size had its own
        "sizes": [size_of(100_000, None, 0.9), size_of(1_000_000, 1.0, 2.0), size_of(1_000_000, 10.0, 9.0),
                  size_of(1_000_000, 5.0, 4.0)],
    }  # fmt: skip
    rows = summary.evaluate_still_rows(document)
    assert [(r.size, r.target, r.met) for r in rows] == [
        (100_000, "<= 1 s at 100k", True),
        (1_000_000, "<= 1.5 s at 1M, 1 % moved", False),
        (1_000_000, "<= 10 s at 1M, 10 % moved", True),
        (1_000_000, "", None),
    ]
    assert [r.input.rsplit(", ", 1)[-1] for r in rows] == [
        "1 % of pairs moved",
        "1 % of pairs moved",
        "10 % of pairs moved",
        "5 % of pairs moved",
    ]


def test_a_run_of_code_not_yet_committed_is_recorded_as_such(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    (tmp_path / "monitor").mkdir()
    (tmp_path / "monitor" / "code.py").write_text("A = 1\n")
    (tmp_path / "README.md").write_text("notes\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first")
    head = git("rev-parse", "--short", "HEAD").strip()

    assert summary.code_commit(tmp_path) == head
    (tmp_path / "README.md").write_text("more notes\n")
    assert summary.code_commit(tmp_path) == head, "prose changed, not the code measured"
    (tmp_path / "monitor" / "code.py").write_text("A = 2\n")
    assert summary.code_commit(tmp_path) == f"{head}+changes"

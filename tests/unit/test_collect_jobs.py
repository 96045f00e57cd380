"""The collector job registry (monitor/collect/jobs): what the stage schedules, the interval map
the collection page reads and the tables each job writes all come from the one table."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from monitor.collect import context as context_module
from monitor.collect import stage as stage_module
from monitor.collect.clients import ADMIN, ClientKind
from monitor.collect.context import ClusterContext, CollectorJob, Verdicts
from monitor.collect.jobs import JOBS, job_intervals
from monitor.collect.stage import ClusterCollector, CollectStage
from monitor.core.clock import FakeClock
from monitor.core.scheduler import DAEMON_POOL, run_intervals
from monitor.core.settings import ClusterConfig, CollectConfig, Intervals, ProbeConfig
from monitor.kafka.fake import FakeCluster
from monitor.store.runs import Run
from monitor.store.schema import metadata
from tests.fixtures.collect import fake_clients

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)


class RecordingScheduler:
    def __init__(self) -> None:
        self.jobs: dict[str, tuple[float, float]] = {}
        self.pools: dict[str, str] = {}
        self.soon: list[str] = []

    def run_soon(self, job_id: str) -> bool:
        self.soon.append(job_id)
        return True

    def every(
        self,
        job_id: str,
        seconds: float,
        func: Callable[[], Any],
        *,
        first_run_in: float = 0.0,
        pool: str = DAEMON_POOL,
    ) -> None:
        self.jobs[job_id] = (seconds, first_run_in)
        self.pools[job_id] = pool


def test_every_job_writes_tables_of_the_schema_and_no_table_has_two_writers() -> None:
    written = Counter(table for job in JOBS.values() for table in job.tables)

    assert set(written) <= set(metadata.tables), "a job names a table the models do not have"
    assert [table for table, writers in written.items() if writers > 1] == []
    assert all(job.tables for job in JOBS.values())


def test_the_interval_map_takes_each_collect_job_from_its_setting() -> None:
    intervals = Intervals(offsets_seconds=7, metadata_seconds=70, log_dirs_seconds=700, probe_seconds=3)

    collect = job_intervals(intervals)
    every = run_intervals(intervals, collect=collect)

    assert collect == {
        "metadata": 70, "configs": 70, "offsets": 7, "commits": 7, "end_offsets": 7, "log_dirs": 700, "probe": 3,
        "share_groups": 7,
    }  # fmt: skip
    assert {name: every[name] for name in JOBS} == collect
    assert set(every) - set(JOBS) == {"evaluate", "alert", "retention", "maintenance"}


@pytest.mark.parametrize("probe", [False, True])
def test_the_stage_schedules_every_enabled_job_for_every_cluster(probe: bool) -> None:
    clock = FakeClock()
    scheduler = RecordingScheduler()
    intervals = Intervals(offsets_seconds=5)
    config = CollectConfig(probe=ProbeConfig(enabled=probe))
    stage = CollectStage([], intervals, config, lambda: None, clock, scheduler)  # type: ignore[arg-type]
    fake = FakeCluster("east", clock=clock)
    collector = ClusterCollector(
        ClusterConfig(name="east", bootstrap_servers=["127.0.0.1:9092"]),
        None,  # type: ignore[arg-type]
        clock,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        config,
        clients=fake_clients(fake),
    )

    stage._schedule(collector)

    enabled = {name: job for name, job in JOBS.items() if name != "probe" or probe}
    assert scheduler.jobs == {
        f"east:{name}": (job.interval(intervals), job.first_run_in) for name, job in enabled.items()
    }
    assert scheduler.jobs["east:offsets"] == (5, 0.0), "the lag's first answer is not put off"
    assert ("east:probe" in scheduler.jobs) is probe
    assert {scheduler.pools[job] for job in scheduler.jobs} == {"collect:east"}, (
        "a cluster's jobs wait for its own timeouts only, in a pool of their own"
    )


def _collector(name: str) -> ClusterCollector:
    clock = FakeClock()
    return ClusterCollector(
        ClusterConfig(name=name, bootstrap_servers=["127.0.0.1:9092"]),
        None,  # type: ignore[arg-type]
        clock,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        CollectConfig(),
        clients=fake_clients(FakeCluster(name, clock=clock)),
    )


def test_the_first_answer_is_when_every_clusters_first_offsets_run_is_over() -> None:
    """What the daemon starts after the lag's first answer waits for this: a run that failed
    and a cluster another instance holds are over too."""
    stage = CollectStage([], Intervals(), CollectConfig(), lambda: None, FakeClock(), RecordingScheduler())  # type: ignore[arg-type]
    east, west = _collector("east"), _collector("west")
    stage.collectors = {"east": east, "west": west}
    stage._held = {"east"}

    def failing(job: str) -> None:
        raise RuntimeError(f"{job} failed")

    east.run = failing  # type: ignore[method-assign]
    stage._leased(west, "metadata")()
    assert not stage.first_answer(0)
    with pytest.raises(RuntimeError):
        stage._leased(east, "offsets")()
    assert not stage.first_answer(0), "west's first offsets run is not over"
    stage._leased(west, "offsets")()  # west is another instance's: nothing collected, over
    assert stage.first_answer(0)


def test_the_lag_is_answered_in_full_once_the_append_times_are_read_or_after_two_runs() -> None:
    """What waits for the lag (Spark, the store's maintenance) starts once every cluster's offsets
    job has read the append times its cold first run left for the next: when a run leaves none,
    or after its second run whatever it read (a budget, a failure)."""

    class Runner:
        filling = True

    stage = CollectStage([], Intervals(), CollectConfig(), lambda: None, FakeClock(), RecordingScheduler())  # type: ignore[arg-type]
    east, west = _collector("east"), _collector("west")
    stage.collectors = {"east": east, "west": west}
    stage._held = {"east", "west"}
    runners = {"east": Runner(), "west": Runner()}
    for name, collector in stage.collectors.items():
        collector.runners["offsets"] = runners[name]  # type: ignore[assignment]
        collector.run = lambda job: _ran("ok")  # type: ignore[method-assign]
    stage._leased(east, "offsets")()
    stage._leased(west, "offsets")()
    assert stage.first_answer(0) and not stage.answered_in_full(0), "both still fill their append times"
    runners["east"].filling = False
    stage._leased(east, "offsets")()
    assert not stage.answered_in_full(0), "west's append times are still to come"
    stage._leased(west, "offsets")()  # its second run: in full, whatever it left
    assert stage.answered_in_full(0)


def _ran(status: str) -> Run:
    at = datetime(2026, 12, 4, tzinfo=UTC)
    return Run("east", "offsets", at, finished_at=at, status=status)


def test_the_start_s_answers_name_the_clusters_that_did_not_answer(caplog: pytest.LogCaptureFixture) -> None:
    stage = CollectStage([], Intervals(), CollectConfig(), lambda: None, FakeClock(), RecordingScheduler())  # type: ignore[arg-type]
    east, west = _collector("east"), _collector("west")
    stage.collectors = {"east": east, "west": west}
    stage._held = {"east", "west"}
    east.run = lambda job: _ran("failed")  # type: ignore[method-assign]
    west.run = lambda job: _ran("ok")  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger=stage_module.__name__)
    for _ in range(2):
        stage._leased(east, "offsets")()
        stage._leased(west, "offsets")()

    said = [r.getMessage() for r in caplog.records if "after the collectors started" in r.getMessage()]
    assert len(said) == 2 and all(
        "over (no answer from east)," in m or "times (no answer from east)," in m for m in said
    ), said
    assert stage.answered_in_full(0), "a cluster that does not answer does not hold back what waits"


def test_an_unknown_job_is_refused_with_the_names_that_exist() -> None:
    fake = FakeCluster()
    collector = ClusterCollector(
        ClusterConfig(name="fake", bootstrap_servers=["127.0.0.1:9092"]),
        None,  # type: ignore[arg-type]
        FakeClock(),
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        CollectConfig(),
        clients=fake_clients(fake),
    )

    with pytest.raises(
        ValueError,
        match=r"no collector job 'lag'; the jobs are commits, configs, end_offsets, log_dirs, metadata, offsets",
    ):
        collector.run("lag")


def test_a_job_asking_for_its_next_run_now_asks_the_scheduler_for_its_own_cluster() -> None:
    scheduler = RecordingScheduler()
    stage = CollectStage([], Intervals(), CollectConfig(), lambda: None, FakeClock(), scheduler)  # type: ignore[arg-type]

    stage._run_soon("east")("offsets")
    stage._run_soon("west")("offsets")

    assert scheduler.soon == ["east:offsets", "west:offsets"]


class RecordingRecorder:
    """Stands in for the run recorder: notes when a run's row would be written."""

    def __init__(self, events: list[str], status: str = "ok") -> None:
        self.events = events
        self.status = status

    @contextmanager
    def run(self, cluster: str | None, job: str) -> Iterator[Run]:
        run = Run(cluster, job, T0)
        yield run
        run.finished_at, run.status = T0 + timedelta(seconds=1), self.status
        self.events.append(f"recorded {job}")


def _recorded_collector(events: list[str], status: str = "ok", **hooks: Any) -> ClusterCollector:
    """A collector of cluster `east` on a fake cluster, its runs noted in `events` as recorded
    with `status`; `hooks`: on_critical, on_sample."""
    return ClusterCollector(
        ClusterConfig(name="east", bootstrap_servers=["127.0.0.1:9092"]),
        None,  # type: ignore[arg-type]
        FakeClock(),
        RecordingRecorder(events, status),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        CollectConfig(),
        clients=fake_clients(FakeCluster("east")),
        **hooks,
    )


@pytest.mark.parametrize(("status", "told"), [("ok", True), ("partial", True), ("failed", False)])
def test_a_run_tells_on_sample_after_it_is_recorded(status: str, told: bool) -> None:
    """With the job's name and when the run ended; a failed run wrote no sample and tells nothing."""
    events: list[str] = []
    collector = _recorded_collector(
        events, status, on_sample=lambda cluster, job, at: events.append(f"sample {cluster} {job} {at - T0}")
    )
    collector.runners["metadata"] = lambda record: events.append("ran metadata")

    collector.run("metadata")

    assert events == ["ran metadata", "recorded metadata"] + (
        ["sample east metadata 0:00:01"] if told else []
    ), "an evaluation asked by the sample must find the run (and its samples) in the store"


def test_a_run_that_saw_a_critical_change_asks_for_the_evaluation_once_it_is_recorded() -> None:
    """Asked while the run was under way, the evaluation saw its samples but dated them by the
    run before (the newest recorded): a `for:` then elapsed up to an interval early."""
    events: list[str] = []
    collector = _recorded_collector(events, on_critical=lambda cluster: events.append(f"evaluate {cluster}"))

    def changed(record: Run) -> None:
        collector.context.critical(record, "metadata", True)
        events.append("ran metadata")

    collector.runners["metadata"] = changed
    collector.run("metadata")

    assert events == ["ran metadata", "recorded metadata", "evaluate east"]


class EchoClient:
    """The client of a job the registry gains in the test below; notes its life cycle."""

    def __init__(self, events: list[str], name: str) -> None:
        self.events, self.name = events, name
        events.append(f"made for {name}")

    def start(self) -> None:
        self.events.append("started")

    def close(self) -> None:
        self.events.append("closed")


def test_a_new_job_is_its_module_and_one_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the README's recipe says: a job with a Kafka client of its own kind needs no change to
    the stage or the context; the collector makes, starts and closes its client."""
    events: list[str] = []
    echo: ClientKind[EchoClient] = ClientKind(
        "echo", lambda cluster, config: EchoClient(events, cluster.name)
    )

    def build(ctx: ClusterContext) -> Callable[[Run], None]:
        return lambda run: events.append(f"ran with the client of {ctx.client(echo).name}")

    job = CollectorJob("echo", build, lambda intervals: 60.0, ("echo_samples",), clients=(echo,))
    monkeypatch.setattr(stage_module, "JOBS", {"echo": job})  # the registry, with only its line
    collector = ClusterCollector(
        ClusterConfig(name="east", bootstrap_servers=["127.0.0.1:9092"]),
        None,  # type: ignore[arg-type]
        FakeClock(),
        RecordingRecorder(events),  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        CollectConfig(),
    )
    assert events == ["made for east"], "made once, before the first run, not connected yet"

    collector.start()
    collector.run("echo")
    collector.stop()

    assert events[1:] == ["started", "ran with the client of east", "recorded echo", "closed"]
    with pytest.raises(LookupError, match="no job of cluster east declared the 'admin' client"):
        collector.context.client(ADMIN)


def test_a_filter_is_asked_once_per_name_and_its_verdicts_are_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    def accepts(name: str) -> bool:
        asked.append(name)
        return name.startswith("orders")

    monkeypatch.setattr(context_module, "NAMES_REMEMBERED", 3)
    verdicts = Verdicts(accepts)
    assert [verdicts(n) for n in ("orders", "audit", "orders", "audit", "orders-eu")] == [
        True, False, True, False, True,
    ]  # fmt: skip
    assert asked == ["orders", "audit", "orders-eu"]
    verdicts("billing")  # a fourth name: the remembered three are forgotten
    verdicts("orders")
    assert asked == ["orders", "audit", "orders-eu", "billing", "orders"]

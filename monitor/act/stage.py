"""The act stage as an app component: the retention service and its scheduled job.

`start()` validates the policy file (a bad one stops the start, with its lines) and opens the
config-as-code repository; the job (`retention.interval_seconds`) applies approved requests,
retries those Kafka did not answer, warns the owning team before a raise expires, and reverts the
expired ones; it also applies approved repairs a stop left unapplied and records whether the
applied ones helped (`monitor.act.repairs`). A failing run is logged and the next one tries
again: nothing is lost, since every step's state is in PostgreSQL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Engine

from monitor.act.gitrepo import ConfigRepo
from monitor.act.policy import default_policy_path, load_policy
from monitor.act.repairs import RepairService
from monitor.act.service import RetentionService
from monitor.core.clock import Clock
from monitor.core.owners import owners_file
from monitor.core.resources import state_dir
from monitor.core.scheduler import Scheduler
from monitor.core.settings import Settings
from monitor.store.runs import RunRecorder

log = logging.getLogger(__name__)


def default_repo_path() -> Path:
    """The config-as-code repository when `retention.repo_path` is unset:
    `$KAFKA_HEALTH_VAR/retention-configs` (`./var/retention-configs`)."""
    return state_dir() / "retention-configs"


def build_service(
    settings: Settings, engine: Callable[[], Engine], clock: Clock, repo_path: Path | None = None
) -> RetentionService:
    """The retention service for `settings`; its config-as-code repository is `repo_path`, else
    `retention.repo_path`, else `default_repo_path()`. Connects nothing."""
    config = settings.retention
    repo = ConfigRepo(
        repo_path or config.repo_path or default_repo_path(),
        remote=config.repo_remote,
        branch=config.repo_branch,
    )
    return RetentionService(
        config,
        list(settings.clusters),
        engine,
        clock,
        repo,
        config.policy_file or default_policy_path(),
        owners_file(settings.alert),
    )


def build_repairs(settings: Settings, engine: Callable[[], Engine], clock: Clock) -> RepairService:
    """The repair actions for `settings`: the same clusters, and the same reviewers (the retention
    policy's `reviewers`) as the retention button. Connects nothing."""
    path = settings.retention.policy_file or default_policy_path()
    return RepairService(list(settings.clusters), engine, clock, lambda: load_policy(path))


class ActStage:
    name = "act"

    def __init__(
        self,
        service: RetentionService,
        scheduler: Scheduler,
        interval_seconds: float,
        repairs: RepairService | None = None,
    ) -> None:
        self.service = service
        self.repairs = repairs
        self._scheduler = scheduler
        self._interval = interval_seconds
        self._recorder: RunRecorder | None = None

    def start(self) -> None:
        self.service.start()
        self._recorder = RunRecorder(self.service.engine(), self.service.clock)
        self._scheduler.every("retention", self._interval, self.run)

    def stop(self) -> None:
        if self.repairs is not None:
            self.repairs.stop()
        self.service.stop()

    def run(self) -> None:
        """One run of the job, recorded in `collection_runs` like every other job."""
        assert self._recorder is not None
        with self._recorder.run(None, "retention") as run:
            counts = self.service.tick()
            if self.repairs is not None:  # approved repairs left unapplied, and whether they helped
                counts.update(self.repairs.tick())
            for key, value in counts.items():
                run.count(key, value)

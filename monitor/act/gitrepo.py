"""The config-as-code repository: every retention change is a commit before it reaches Kafka.

One YAML file per topic, `<cluster>/<topic>.yaml`, holding the configs the retention button set on
the topic (a key it restored to the broker's default is absent). The commit message carries the
request id, requester, reason, expiry and approver (or "pending review" for an instant raise), so
`git log` is the change history and `git revert` a way back that any reviewer understands.

With a remote configured, each commit is pushed; a failed push is reported (and recorded by the
caller) without undoing the commit: the next successful push carries it. Works through GitPython,
which drives the git command line, so the repository is an ordinary one people can clone.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import git
import yaml

from monitor.core.errors import ConfigError, MonitorError
from monitor.core.yaml_files import read_yaml

FILE_HEADER = (
    "# Retention configs set on this topic through kafka-health's retention button.\n"
    "# Written by kafka-health: change them with `kafka-health retention ...`, not by hand.\n"
)


class ConfigRepoError(MonitorError):
    """The config-as-code repository cannot be used (path, permissions, a broken repository)."""


@dataclass(frozen=True, slots=True)
class CommitInfo:
    sha: str
    message: str
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """What a commit message says about a change."""

    title: str
    request_id: int
    requester: str
    reason: str
    expires: str
    approver: str
    changes: Mapping[str, tuple[str | None, str | None]]
    """Config name -> (old value, new value); None: the broker's default."""

    def message(self) -> str:
        lines = [self.title, ""]
        lines += [
            f"{name}: {old or 'default'} -> {new or 'default'}" for name, (old, new) in self.changes.items()
        ]
        lines += [
            "",
            f"Request: {self.request_id}",
            f"Requested-by: {self.requester}",
            f"Reason: {' '.join(self.reason.split())}",
            f"Expires: {self.expires}",
            f"Approved-by: {self.approver}",
        ]
        return "\n".join(lines) + "\n"


class ConfigRepo:
    """One working copy, used by one process at a time per path (a lock serialises commits)."""

    def __init__(
        self,
        path: Path,
        remote: str | None = None,
        branch: str = "main",
        author_name: str = "kafka-health",
        author_email: str = "kafka-health@localhost",
    ) -> None:
        self.path = path
        self.remote = remote
        self.branch = branch
        self._actor = git.Actor(author_name, author_email)
        self._repo: git.Repo | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Open the repository, creating it (or cloning the remote) when the path holds none."""
        try:
            if (self.path / ".git").exists():
                self._repo = git.Repo(self.path)
            elif self.remote and not self.path.exists():
                self._repo = self._clone(self.remote)
            else:
                self.path.mkdir(parents=True, exist_ok=True)
                self._repo = git.Repo.init(self.path, initial_branch=self.branch)
                if self.remote:
                    self._repo.create_remote("origin", self.remote)
        except (git.GitError, OSError) as exc:
            raise ConfigRepoError(
                f"the config repository at {self.path} cannot be used: {_first_line(exc)}; check "
                "retention.repo_path (a git working copy, or an empty or missing directory) and "
                "retention.repo_remote"
            ) from exc

    def _clone(self, remote: str) -> git.Repo:
        """A working copy of `remote` on our branch (created when the remote has none yet)."""
        try:
            return git.Repo.clone_from(remote, self.path, branch=self.branch)
        except git.GitCommandError:
            repo = git.Repo.clone_from(remote, self.path)  # an empty remote, or another branch
            repo.git.checkout("-B", self.branch)
            return repo

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            raise RuntimeError("ConfigRepo.start() must be called first")
        return self._repo

    def file_of(self, cluster: str, topic: str) -> Path:
        return Path(cluster) / f"{topic}.yaml"

    def read_topic(self, cluster: str, topic: str) -> dict[str, str]:
        """The configs the repository holds for the topic (empty when it has no file).

        Raises ConfigRepoError when the file is not one this module wrote (not YAML, no mapping)."""
        path = self.path / self.file_of(cluster, topic)
        if not path.exists():
            return {}
        try:
            data, _ = read_yaml(path)
        except ConfigError as exc:
            raise ConfigRepoError(str(exc)) from exc
        configs = data.get("configs") if isinstance(data, dict) else None
        if not isinstance(configs, dict | None):
            raise ConfigRepoError(f"{path}: `configs:` must be a mapping of config name to value")
        return {str(k): str(v) for k, v in (configs or {}).items()}

    def commit_topic(
        self, cluster: str, topic: str, configs: Mapping[str, str | None], record: ChangeRecord
    ) -> str:
        """Write the topic's file with `configs` merged in (None removes a key), commit it with
        `record`'s message, push when a remote is set; returns the commit id.

        Raises ConfigRepoError when the commit cannot be made. A failed push does not raise:
        see `push`.
        """
        with self._lock:
            try:
                current = self.read_topic(cluster, topic)
                for name, value in configs.items():
                    if value is None:
                        current.pop(name, None)
                    else:
                        current[name] = value
                relative = self.file_of(cluster, topic)
                absolute = self.path / relative
                absolute.parent.mkdir(parents=True, exist_ok=True)
                body = {"cluster": cluster, "topic": topic, "configs": dict(sorted(current.items()))}
                absolute.write_text(FILE_HEADER + yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
                self.repo.index.add([str(relative)])
                commit = self.repo.index.commit(record.message(), author=self._actor, committer=self._actor)
            except (git.GitError, OSError, ValueError) as exc:
                raise ConfigRepoError(
                    f"cannot commit {self.file_of(cluster, topic)} in {self.path}: {_first_line(exc)}"
                ) from exc
            return str(commit.hexsha)

    def note(self, record: ChangeRecord) -> str:
        """An empty commit recording a decision that changes no value (a review, an extension)."""
        with self._lock:
            try:
                self.repo.git.commit(
                    "--allow-empty",
                    "-m",
                    record.message(),
                    author=f"{self._actor.name} <{self._actor.email}>",
                    env={
                        "GIT_COMMITTER_NAME": self._actor.name or "",
                        "GIT_COMMITTER_EMAIL": self._actor.email or "",
                    },
                )
                return str(self.repo.head.commit.hexsha)
            except (git.GitError, OSError) as exc:
                raise ConfigRepoError(f"cannot commit in {self.path}: {_first_line(exc)}") from exc

    def push(self) -> str | None:
        """Push the branch to the remote; None on success or without a remote, else the reason."""
        if not self.remote:
            return None
        with self._lock:
            try:
                self.repo.git.push("origin", f"HEAD:refs/heads/{self.branch}")
            except git.GitError as exc:
                return f"push to {self.remote} failed: {_first_line(exc)}"
        return None

    def log(self, limit: int = 20) -> list[CommitInfo]:
        """The newest commits first."""
        if not self.repo.head.is_valid():
            return []
        return [
            CommitInfo(str(c.hexsha), str(c.message), tuple(str(f) for f in c.stats.files))
            for c in self.repo.iter_commits(max_count=limit)
        ]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

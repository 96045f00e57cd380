"""The config-as-code repository on a real git repository in a temporary directory, with a bare
repository as its remote."""

from __future__ import annotations

from pathlib import Path

import git
import pytest
import yaml

from monitor.act.gitrepo import ChangeRecord, ConfigRepo, ConfigRepoError


def record(request_id: int = 7, approver: str = "bob") -> ChangeRecord:
    return ChangeRecord(
        title="retention: raise payments.orders on prod",
        request_id=request_id,
        requester="alice",
        reason="ledger consumer is 5 h behind\nafter the outage",
        expires="2030-01-02T03:04:05+00:00",
        approver=approver,
        changes={"retention.ms": ("86400000", "172800000")},
    )


def test_commit_writes_one_file_per_topic_with_the_message(tmp_path: Path) -> None:
    repo = ConfigRepo(tmp_path / "configs")
    repo.start()
    sha = repo.commit_topic("prod", "payments.orders", {"retention.ms": "172800000"}, record())
    path = tmp_path / "configs" / "prod" / "payments.orders.yaml"
    data = yaml.safe_load(path.read_text())
    assert data == {"cluster": "prod", "topic": "payments.orders", "configs": {"retention.ms": "172800000"}}
    commit = git.Repo(tmp_path / "configs").commit(sha)
    assert commit.message.splitlines()[0] == "retention: raise payments.orders on prod"
    for line in (
        "retention.ms: 86400000 -> 172800000",
        "Request: 7",
        "Requested-by: alice",
        "Reason: ledger consumer is 5 h behind after the outage",
        "Expires: 2030-01-02T03:04:05+00:00",
        "Approved-by: bob",
    ):
        assert line in commit.message.splitlines()
    assert list(commit.stats.files) == ["prod/payments.orders.yaml"]
    assert commit.author.name == "kafka-health"


def test_revert_to_default_removes_the_key(tmp_path: Path) -> None:
    repo = ConfigRepo(tmp_path / "configs")
    repo.start()
    repo.commit_topic("prod", "t", {"retention.ms": "2", "retention.bytes": "5"}, record())
    repo.commit_topic("prod", "t", {"retention.ms": None}, record())
    assert repo.read_topic("prod", "t") == {"retention.bytes": "5"}
    assert len(repo.log()) == 2


def test_note_is_an_empty_commit(tmp_path: Path) -> None:
    repo = ConfigRepo(tmp_path / "configs")
    repo.start()
    first = repo.commit_topic(
        "prod", "t", {"retention.ms": "2"}, record(approver="pending review (instant tier)")
    )
    note = repo.note(record(approver="carol"))
    commit = repo.repo.commit(note)
    assert commit.parents[0].hexsha == first
    assert "Approved-by: carol" in commit.message
    assert not commit.stats.files


def test_pushes_to_the_remote(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git.Repo.init(remote, bare=True)
    repo = ConfigRepo(tmp_path / "configs", remote=str(remote))
    repo.start()
    sha = repo.commit_topic("prod", "t", {"retention.ms": "2"}, record())
    assert repo.push() is None
    assert git.Repo(remote).commit("main").hexsha == sha
    # A second working copy (another daemon, a fresh machine) clones it.
    clone = ConfigRepo(tmp_path / "clone", remote=str(remote))
    clone.start()
    assert clone.read_topic("prod", "t") == {"retention.ms": "2"}


def test_failed_push_is_reported_not_raised(tmp_path: Path) -> None:
    remote = tmp_path / "remote.git"
    git.Repo.init(remote, bare=True)
    repo = ConfigRepo(tmp_path / "configs", remote=str(remote))
    repo.start()
    remote.rename(tmp_path / "gone.git")
    repo.commit_topic("prod", "t", {"retention.ms": "2"}, record())
    reason = repo.push()
    assert reason is not None and "push to" in reason


def test_unusable_path_names_the_setting(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(ConfigRepoError, match=r"retention\.repo_path"):
        ConfigRepo(blocker / "configs").start()

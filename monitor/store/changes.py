"""Change counters (`change_versions`): one per subject, raised in the transaction that changes
the subject's rows, so a reader that keeps a copy of them between transactions knows by one
small read whether its copy is still what the store holds.

Subjects: `findings:<cluster>` (every merge of an evaluation's findings, `merge_findings`) and
`alerts` (every alert cycle). A counter rather than a time: it moves with the rows' commit and
never before it, and two writers whose transactions commit out of order still move it twice.
Read the counters first, then the rows: a change committed between the two reads is then read
with the rows and counted again at the next read, never missed.

Data-access functions: the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import Connection, text

ALERTS = "alerts"
FINDINGS = "findings:"


def findings_of(cluster: str) -> str:
    """The subject of `cluster`'s findings."""
    return FINDINGS + cluster


def cluster_of(subject: str) -> str | None:
    """The cluster of a findings subject; None for another subject."""
    return subject[len(FINDINGS) :] if subject.startswith(FINDINGS) else None


def of_findings(counters: Mapping[str, int]) -> dict[str, int]:
    """The findings subjects' counters among `counters` (by subject)."""
    return {subject: version for subject, version in counters.items() if subject.startswith(FINDINGS)}


def raise_versions(conn: Connection, subjects: Iterable[str]) -> dict[str, int]:
    """Raise the counter of each of `subjects` (in name order, so two writers never wait on each
    other crosswise); returns their new values."""
    ordered = sorted(set(subjects))
    if not ordered:
        return {}
    rows = conn.execute(_RAISE, {"subjects": ordered})
    return {str(subject): int(version) for subject, version in rows.all()}


def versions(conn: Connection) -> dict[str, int]:
    """Every subject's counter."""
    rows = conn.execute(text("SELECT subject, version FROM change_versions"))
    return {str(subject): int(version) for subject, version in rows.all()}


_RAISE = text(
    "INSERT INTO change_versions (subject, version)"
    " SELECT s, 1 FROM unnest(CAST(:subjects AS text[])) WITH ORDINALITY AS u(s, n) ORDER BY n"
    " ON CONFLICT (subject) DO UPDATE SET version = change_versions.version + 1"
    " RETURNING subject, version"
)

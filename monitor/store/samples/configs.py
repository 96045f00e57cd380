"""Topic configuration history (topic_configs): a row per value while it holds, opened and closed
only on change."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlalchemy import Connection, text

from monitor.core.records import (
    TopicConfigEntry,
)


def record_topic_configs(
    conn: Connection,
    cluster: str,
    entries: Sequence[TopicConfigEntry],
    described_topics: Collection[str],
    now: datetime,
) -> int:
    """Bring the open topic_configs rows of the described topics in line with `entries`.

    For each topic in `described_topics` (and each topic an entry names): an open row whose value,
    source or sensitivity changed, or whose key is no longer described, is closed (valid_to =
    `now`) and, for a changed key, a new open row starts at `now`; new keys get an open row;
    unchanged rows are left alone. Topics not described (their DescribeConfigs failed) are not
    touched. Returns the number of rows opened. Does not commit.
    """
    topics = set(described_topics) | {e.topic for e in entries}
    if not topics:
        return 0
    current = {
        (row.topic, row.name): row
        for row in conn.execute(
            text(
                "SELECT id, topic, name, value, source, sensitive FROM topic_configs "
                "WHERE cluster = :cluster AND valid_to IS NULL AND topic = ANY(CAST(:topics AS text[]))"
            ),
            {"cluster": cluster, "topics": sorted(topics)},
        )
    }
    wanted = {(e.topic, e.name): e for e in entries}
    to_close = []
    to_open = []
    for key, entry in wanted.items():
        row = current.get(key)
        if row is not None and (row.value, row.source, row.sensitive) == (
            entry.value,
            entry.source,
            entry.sensitive,
        ):
            continue
        if row is not None:
            to_close.append(row.id)
        to_open.append(entry)
    to_close.extend(row.id for key, row in current.items() if key not in wanted)
    if to_close:
        conn.execute(
            text("UPDATE topic_configs SET valid_to = :now WHERE id = ANY(CAST(:ids AS bigint[]))"),
            {"now": now, "ids": to_close},
        )
    if to_open:
        conn.execute(
            text(
                "INSERT INTO topic_configs (cluster, topic, name, value, source, sensitive, valid_from) "
                "VALUES (:cluster, :topic, :name, :value, :source, :sensitive, :now)"
            ),
            [
                {
                    "cluster": cluster,
                    "topic": e.topic,
                    "name": e.name,
                    "value": e.value,
                    "source": e.source,
                    "sensitive": e.sensitive,
                    "now": now,
                }
                for e in to_open
            ],
        )
    return len(to_open)

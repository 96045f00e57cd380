"""Which columns of a rule's entity `/metrics` serves, and the PromQL that reads each one with
exactly the entity's key labels (so two columns of one entity match one to one).

Every read is `max by (<keys>)`: a scrape adds its target's labels (`job`, `instance`) and the
kafka-lag-go names carry `clustername`, so two reads of one entity would not match otherwise, and
two daemons serving the same database (replicas) give one series, not two. Numbers are read
through recording rules (`recording_rules`) named after the metric.

Read from the catalogue: a state metric whose query is the entity and whose column is one of the
entity's derived columns (`monitor.core.derived`) serves that column; a metric of value 1 labelled
with a column's text (`kafka_health_group_status{status=...}`) serves that text column. Nothing
else is assumed: a column the catalogue does not serve under the entity's own query is not
served, even when a similar one exists elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from monitor.core.derived import ENTITIES, KEYS, columns_of
from monitor.expose.metrics.catalogue import STATE, MetricSpec

LABELLED_ONE = "one"
"""The catalogue's column of a metric whose value is 1 and whose meaning is in a label."""
ALIAS_LABEL = "clustername"
"""kafka-lag-go's copy of `cluster`, dropped so that every read has the key labels only."""


@dataclass(frozen=True, slots=True)
class ServedColumn:
    """One column of an entity as `/metrics` serves it."""

    column: str
    metric: str
    keys: tuple[str, ...]
    """The entity's key labels (cluster first): those every read of the entity keeps."""
    text_label: str | None = None
    """For a text column: the label holding its value on a metric of value 1."""

    def read(self, matchers: str = "") -> str:
        """The PromQL reading the column, one series per entity with only its key labels
        (`matchers`: `{...}` or empty): a number from its recording rule, a text column's metric
        aggregated here with `matchers` on its label."""
        if self.recorded is not None and not matchers:
            return self.recorded
        return self.aggregated(matchers)

    def aggregated(self, matchers: str = "") -> str:
        return f"max by ({', '.join(self.keys)}) ({self.metric}{matchers})"

    @property
    def recorded(self) -> str | None:
        """The recording rule's name for a number, after Prometheus' `level:metric:operations`;
        None for a text column."""
        if self.text_label is not None:
            return None
        return f"{'_'.join(self.keys)}:{self.metric}:max"


def recording_rules(used: str) -> list[dict[str, str]]:
    """The recording rules of the columns whose recorded names `used` (PromQL text) reads."""
    rules: dict[str, str] = {}
    for entity in ENTITIES:
        for served in served_columns(entity).values():
            name = served.recorded
            if name is not None and re.search(rf"(?<![\w:]){re.escape(name)}(?![\w:])", used):
                rules.setdefault(name, served.aggregated())
    return [{"record": name, "expr": expr} for name, expr in rules.items()]


@lru_cache(maxsize=16)
def served_columns(entity: str) -> dict[str, ServedColumn]:
    """The columns of `entity` that `/metrics` serves, by column name (empty for an entity it
    does not serve at all, as `share_group_topic`)."""
    specs = [spec for spec in STATE if spec.query == entity and spec.column is not None]
    if not specs:
        return {}
    keys = key_labels(specs)
    columns = columns_of(entity)
    served: dict[str, ServedColumn] = {}
    for spec in specs:
        if spec.column == LABELLED_ONE:
            extra = [label for label in spec.labels if label not in keys and label != ALIAS_LABEL]
            if len(extra) == 1 and columns.get(extra[0]) and columns[extra[0]].type == "string":
                served.setdefault(extra[0], ServedColumn(extra[0], spec.name, keys, extra[0]))
        elif (
            spec.column in columns
            and columns[spec.column].type != "string"
            and (spec.column not in served or spec.labels == keys)  # ours before kafka-lag-go's
        ):
            served[spec.column] = ServedColumn(spec.column, spec.name, keys)
    return served


def key_labels(specs: list[MetricSpec]) -> tuple[str, ...]:
    """The labels every metric of one query has (but kafka-lag-go's alias): its key labels."""
    common = [label for label in specs[0].labels if label != ALIAS_LABEL]
    return tuple(label for label in common if all(label in spec.labels for spec in specs))


def key_label(entity: str, column: str) -> str | None:
    """The label that holds key column `column` of `entity` on its series (`group_id` is
    `group`, `broker_id` is `broker`), or None when the entity is not served."""
    served = served_columns(entity)
    if not served or (column != "cluster" and column not in KEYS.get(entity, ())):
        return None
    keys = next(iter(served.values())).keys
    if column in keys:
        return column
    short = column.removesuffix("_id")
    return short if short in keys else None

"""The meaning of every field the read layer returns, in one place.

The pages, the CLI reports and the JSON API show the same records (`monitor.expose.read`), so a
field's meaning is written once: the derived columns take theirs from the contract in
`monitor.core.derived` (which follows DOMAIN.md), the rest are defined here. A record class names the
derived entity it comes from (`__entity__`), so a roll-up's `offset_lag` is described as a sum and
a partition's as a difference. The OpenAPI document gets these descriptions through
`Described.__get_pydantic_json_schema__`; a test checks that no field is left undescribed.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import GetJsonSchemaHandler
from pydantic_core import CoreSchema

from monitor.core.derived import COMMON, ENTITIES

FIELDS: dict[str, str] = {
    "cluster": "cluster name, as configured in the monitor",
    "evaluated_at": "the evaluation these numbers come from: the newest evaluation of the cluster (in a "
    "group's own answers and the lists of groups, every figure but the offset lag and the offsets, which say "
    "their own time)",
    "offset_lag_as_of": "how old the offset lag is: the older of the times of the committed and the end "
    "offset it is computed from (the oldest over the partitions of a sum, over the groups of a count of "
    "lagging groups); the offset lag is read from the "
    "newest offsets the store holds, so it moves between evaluations; equal to evaluated_at when it is the "
    "evaluation's",
    "committed_offset_as_of": "when the committed offset was seen: the commit's time from the commit stream, "
    "or the offsets collection's sample time, whichever is newer (null: the evaluation's, evaluated_at)",
    "end_offset_as_of": "when the end offset was listed by the offsets collection (null: the evaluation's, "
    "evaluated_at)",
    "cluster_id": "the cluster id Kafka reports",
    "bootstrap": "bootstrap servers the monitor connects to",
    "controller_id": "node id of the active controller (a KRaft cluster's metadata quorum leader)",
    "first_seen": "first time the monitor saw it",
    "last_seen": "last time the monitor saw it",
    "updated_at": "when the collector last wrote this row",
    "brokers_up": "brokers in the cluster metadata now",
    "topics": "topics in the cluster (deleted ones excluded)",
    "consumer_groups": "consumer groups of the newest evaluation or with committed offsets in the store "
    "(before the first evaluation, the latter)",
    "lagging_groups": "consumer groups with offset lag > 0, by the offset lag as fresh as the store holds it "
    "(offset_lag_as_of says how old); the evaluation's for a group the store holds no offsets of",
    "groups_by_status": "consumer groups per sliding-window status (OK, WARN, ERR)",
    "findings_by_severity": "open findings (pending or firing rule matches) per severity",
    "kafka_version": "the Kafka release (major.minor) of the cluster's oldest live broker, from the "
    "API versions its brokers answer; null until a broker was identified",
    "unavailable": "what this Kafka release cannot give (empty when it gives everything the monitor "
    "shows, or when the release is unknown)",
    "feature": "the feature's name (monitor.core.kafka_features.Feature)",
    "text": 'what the monitor shows for it, e.g. "log directory volume size: not available on Kafka '
    '2.8 (from 3.3)"',
    "from_version": "the first Kafka release (major.minor) that gives it",
    "broker_id": "broker id",
    "host": "host name",
    "port": "port",
    "rack": "rack (null when unset)",
    "up": "in the cluster metadata",
    "internal": "an internal topic of Kafka (such as __consumer_offsets)",
    "cleanup_policy": "cleanup.policy: delete, compact or both",
    "min_insync_replicas": "min.insync.replicas of the topic",
    "retention_ms": "retention.ms: how long records are kept (null when unlimited)",
    "retention_bytes": "retention.bytes: the size limit per partition (null when unlimited)",
    "remote_storage": "remote.storage.enable: tiered storage is on, so retention limits apply to the "
    "remote copy and local.retention.* to the local disk",
    "configs": "current topic configuration (name -> value); sensitive values are never shown",
    "preferred_leader": "the first assigned replica, which should lead",
    "replicas": "assigned replica broker ids, the preferred leader first",
    "isr": "in-sync replica broker ids",
    "headroom_bytes": "retention.bytes - size_bytes: bytes the partition can grow before the size "
    "limit deletes (null when unlimited)",
    "min_time_until_data_loss_seconds": "soonest time until a lagging group loses data on it",
    "min_data_loss_margin_seconds": "smallest data_loss_margin_seconds of a group reading it: the "
    "group most at risk of losing unread messages to retention (null: none is at risk)",
    "member_id": "member id the coordinator assigned",
    "client_id": "client.id of the consumer",
    "group_instance_id": "group.instance.id of a static member (null when dynamic)",
    "assignment": "assigned partitions as topic:partition",
    "owner": "host of the member the partition is assigned to (null when unassigned)",
    "id": "finding id",
    "rule": "name of the alert rule",
    "entity": "what the rule evaluates: group_partition, group_topic, group, partition, topic, "
    "broker or cluster",
    "entity_key": "the entity the rule matched, as cluster/key...",
    "labels": "labels of the finding (cluster, topic, group_id, ...), used for routing",
    "severity": "severity tier: critical pages, warning goes to chat and email, info stays in the UI",
    "value": "the value the rule measured",
    "summary": "one-line summary",
    "description": "what it means and what to do",
    "annotations": "the rule's annotations rendered for it, name -> text (runbook, dashboard, ...)",
    "state": "pending (the rule's `for` does not hold yet) or firing",
    "items": "the entries of this page",
    "total": "entries matching the request, over all pages",
    "limit": "the page size asked for",
    "offset": "entries skipped before this page",
    "next_offset": "the offset of the next page (ask again with it and the same limit); null on the "
    "last page",
    "since": "start of the time window",
    "until": "end of the time window",
    "step_seconds": "width of the time buckets each point summarises (maxima of lags, mean rates)",
    "points": "the lag over time, oldest first",
    "members": "members of the group",
    "partitions": "partitions",
}
"""Fields that are not derived columns, or read the same in every record."""


def description(name: str, entity: str | None = None) -> str | None:
    """The meaning of field `name`, as the derived entity `entity` defines it when it has it."""
    if entity is not None:
        for column in ENTITIES[entity]:
            if column.name == name:
                return column.meaning
    if name in FIELDS:
        return FIELDS[name]
    for column in COMMON:
        if column.name == name:
            return column.meaning
    for columns in ENTITIES.values():
        for column in columns:
            if column.name == name:
                return column.meaning
    return None


class Described:
    """Mixin for the read layer's records: their JSON schema describes every field.

    `__entity__` names the derived entity whose meanings win; `__overrides__` gives a record's own
    meaning for a field that differs from both (a topic's `partitions` is not a group's)."""

    __slots__ = ()
    __entity__: ClassVar[str | None] = None
    __overrides__: ClassVar[dict[str, str]] = {}

    @classmethod
    def field_description(cls, name: str) -> str | None:
        return cls.__overrides__.get(name) or description(name, cls.__entity__)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> dict[str, Any]:
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        for name, prop in target.get("properties", {}).items():
            meaning = cls.field_description(name)
            if meaning is not None:
                prop.setdefault("description", meaning)
        return schema

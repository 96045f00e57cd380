"""Burrow's v3 HTTP response shapes as pydantic models, so `monitor.expose.web.api.burrow` answers
exactly Burrow's keys (hyphenated ones through aliases) and the OpenAPI document describes them.

Key names, nesting and types follow Burrow's HTTP endpoint documentation and its response
structs (`core/internal/httpserver/structs.go`, `core/protocol`): for instance a partition's
lag is `current-lag` in the consumer detail and `current_lag` in a status.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from monitor.core import vocabulary

BurrowStatus = Literal["NOTFOUND", vocabulary.ConsumerStatus]


class _Model(BaseModel):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)


class RequestInfo(_Model):
    """The request answered."""

    url: str = Field(description="path of the request")
    host: str = Field(description="host name of the answering server")


class _Response(_Model):
    error: bool = Field(default=False, description="true when the request failed")
    message: str = Field(description="what was returned, or what went wrong")
    request: RequestInfo


class ErrorResponse(_Response):
    """A failed request (an unknown cluster, topic or group)."""


class ClusterList(_Response):
    clusters: list[str] = Field(description="names of the monitored clusters")


class ClientProfile(_Model):
    name: str = Field(description="profile name (here: the cluster name)")
    client_id: str = Field(alias="client-id", description="client id the monitor connects with")
    kafka_version: str = Field(default="", alias="kafka-version", description="not configured: empty")
    tls: None = Field(default=None, description="not shown: null")
    sasl: None = Field(default=None, description="not shown: null")


class ClusterModule(_Model):
    class_name: str = Field(alias="class-name", description="always kafka")
    servers: list[str] = Field(description="bootstrap servers")
    client_profile: ClientProfile = Field(alias="client-profile")
    topic_refresh: int = Field(alias="topic-refresh", description="seconds between metadata refreshes")
    offset_refresh: int = Field(alias="offset-refresh", description="seconds between offset refreshes")


class ClusterModuleDetail(_Response):
    module: ClusterModule


class TopicList(_Response):
    topics: list[str] = Field(description="topic names")


# Named apart from the read layer's `TopicDetail`: two models of one name would be told apart in
# the OpenAPI document by their module paths, which then change whenever a module moves.
class BurrowTopicDetail(_Response):
    offsets: list[int] = Field(description="log end offset of each partition, indexed by partition")


class TopicConsumers(_Response):
    consumers: list[str] = Field(description="groups with committed offsets on the topic")


class ConsumerList(_Response):
    consumers: list[str] = Field(description="consumer group names")


class ConsumerOffset(_Model):
    """One commit."""

    offset: int = Field(description="the committed offset")
    timestamp: int = Field(description="when the commit was seen, epoch milliseconds")
    lag: int | None = Field(description="offset lag at that time")


class ConsumerPartition(_Model):
    offsets: list[ConsumerOffset | None] = Field(
        description="the last commits, oldest first; empty slots are null"
    )
    owner: str = Field(default="", description="host of the member that owns the partition")
    client_id: str = Field(default="", description="client id of that member")
    current_lag: int = Field(default=0, alias="current-lag", description="offset lag now")


class ConsumerDetail(_Response):
    topics: dict[str, list[ConsumerPartition]] = Field(
        description="topic -> its partitions, indexed by partition"
    )


class PartitionStatus(_Model):
    topic: str = Field(description="topic")
    partition: int = Field(description="partition")
    owner: str = Field(description="host of the member that owns the partition")
    client_id: str = Field(description="client id of that member")
    status: BurrowStatus = Field(description="sliding-window status of the partition")
    start: ConsumerOffset | None = Field(description="oldest commit in the window")
    end: ConsumerOffset | None = Field(description="newest commit in the window")
    current_lag: int = Field(description="offset lag now")
    complete: float = Field(description="share of the window's slots filled with commits")
    committed_beyond_end: bool = Field(
        default=False,
        description="committed beyond the end: the committed offset lies beyond the log end (a topic "
        "deleted and re-created, an offset restore gone wrong); `current_lag` reads 0 but the group is not "
        "caught up (its next restart resets the offset), so the status is at least WARN (not in Burrow)",
    )


class ConsumerGroupStatus(_Model):
    cluster: str = Field(description="cluster name")
    group: str = Field(description="consumer group")
    status: BurrowStatus = Field(description="the worst partition status; STOP, STALL, REWIND as ERR")
    complete: float = Field(description="share of partitions whose window is full")
    partitions: list[PartitionStatus] = Field(
        default_factory=list, description="/status: the partitions not OK; /lag: every partition"
    )
    partition_count: int = Field(default=0, description="partitions the group has committed on")
    maxlag: PartitionStatus | None = Field(default=None, description="the partition with the most lag")
    totallag: int = Field(default=0, description="sum of the partitions' current lag")
    partitions_beyond_end: int = Field(
        default=0,
        description="partitions committed beyond the end (see the partitions' `committed_beyond_end`); "
        "when any, the status is at least WARN (not in Burrow)",
    )


class ConsumerStatus(_Response):
    status: ConsumerGroupStatus

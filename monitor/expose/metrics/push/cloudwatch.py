"""Amazon CloudWatch: PutMetricData through boto3.

Each series becomes a datum of the target's namespace: the metric's name, its labels as
dimensions (`cluster`, `group`, `topic`, ...; kafka-lag-go's duplicate `clustername` left out),
the unit its name ends in (`_seconds` -> Seconds, `_bytes` -> Bytes, else Count). Requests hold at
most 1,000 datums and stay under the API's 1 MB, as PutMetricData allows.

Failure policy: boto3's standard retry mode retries throttling, 5xx and connection errors; what it
gives up on is logged and counted, and not queued: an autoscaler acts on the latest value, and a
stale one pushed late would only mislead it. A request CloudWatch refuses (4xx: a bad name or
value) is logged with CloudWatch's message and the rest of the push still goes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from monitor.core.formatting import printable
from monitor.core.settings import CloudWatchTarget
from monitor.expose.metrics.push.metrics import PUSH_FAILURES, PUSH_SAMPLES
from monitor.expose.metrics.push.series import Series

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch.literals import StandardUnitType
    from mypy_boto3_cloudwatch.type_defs import DimensionTypeDef, MetricDatumTypeDef

log = logging.getLogger(__name__)

MAX_DATUMS = 1000
MAX_REQUEST_BYTES = 1_000_000
_SAFE_BYTES = MAX_REQUEST_BYTES * 8 // 10
"""The request's encoding adds keys and escaping around each datum's JSON size; keep a margin."""
LEFT_OUT_LABELS = frozenset({"clustername"})
MAX_DIMENSIONS = 30


def unit_of(name: str) -> StandardUnitType:
    if name.endswith("_seconds"):
        return "Seconds"
    if name.endswith("_bytes"):
        return "Bytes"
    return "Count"


def datum(series: Series, timestamp: datetime, storage_resolution: int) -> MetricDatumTypeDef:
    dimensions: list[DimensionTypeDef] = [
        cast("DimensionTypeDef", {"Name": name, "Value": value[:1024]})
        for name, value in series.labels
        if name not in LEFT_OUT_LABELS and value
    ][:MAX_DIMENSIONS]
    return {
        "MetricName": series.name,
        "Dimensions": dimensions,
        "Timestamp": timestamp,
        "Value": series.value,
        "Unit": unit_of(series.name),
        "StorageResolution": storage_resolution,
    }


def batches(data: Sequence[MetricDatumTypeDef]) -> Iterator[list[MetricDatumTypeDef]]:
    """`data` cut into requests of at most MAX_DATUMS datums and about MAX_REQUEST_BYTES."""
    batch: list[MetricDatumTypeDef] = []
    size = 0
    for one in data:
        one_size = len(json.dumps(one, default=str))
        if batch and (len(batch) >= MAX_DATUMS or size + one_size > _SAFE_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(one)
        size += one_size
    if batch:
        yield batch


class CloudWatchPusher:
    """Sends the series of each push to one CloudWatch namespace."""

    def __init__(self, target: CloudWatchTarget, client: Any | None = None) -> None:
        self.target = target
        if client is None:
            session = boto3.session.Session(profile_name=target.profile, region_name=target.region)
            client = session.client(
                "cloudwatch",
                endpoint_url=target.endpoint_url,
                config=Config(
                    retries={"mode": "standard", "max_attempts": 4},
                    connect_timeout=target.timeout_seconds,
                    read_timeout=target.timeout_seconds,
                ),
            )
        self._client = client

    def close(self) -> None:
        close = getattr(self._client, "close", None)
        if callable(close):
            close()

    def push(self, series: Sequence[Series], timestamp: datetime) -> int:
        """Put one datum per series at `timestamp`; returns how many CloudWatch took."""
        data = [datum(one, timestamp, self.target.storage_resolution) for one in series]
        sent = 0
        for batch in batches(data):
            if self._put(batch):
                sent += len(batch)
                PUSH_SAMPLES.labels(self.target.name, "sent").inc(len(batch))
            else:
                PUSH_SAMPLES.labels(self.target.name, "dropped").inc(len(batch))
        return sent

    def _put(self, batch: list[MetricDatumTypeDef]) -> bool:
        try:
            self._client.put_metric_data(Namespace=self.target.namespace, MetricData=batch)
            return True
        except NoCredentialsError:
            PUSH_FAILURES.labels(self.target.name, "credentials").inc()
            log.error(
                "push %s: no AWS credentials found: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "a profile (push.cloudwatch[].profile) or an instance/task role",
                self.target.name,
            )
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
            PUSH_FAILURES.labels(self.target.name, f"http_{status}").inc()
            log.error(
                "push %s: CloudWatch refused %d datums: %s: %s",
                self.target.name, len(batch), printable(error.get("Code", "?")),
                printable(str(error.get("Message", ""))[:300]),
            )  # fmt: skip
        except BotoCoreError as exc:
            PUSH_FAILURES.labels(self.target.name, "connection").inc()
            log.warning(
                "push %s: CloudWatch did not answer (%s); these %d datums are skipped, the next push "
                "sends fresh values",
                self.target.name, type(exc).__name__, len(batch),
            )  # fmt: skip
        return False

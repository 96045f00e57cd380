"""Writes of the collect stage's samples, one module per family of tables, gathered here (as
`monitor.store.schema` gathers the tables), and the reads the offsets collector needs:

- `offsets`: partition_offsets, group_offsets, group_states, commit_observations, group_members,
  record_timestamps and data_loss_events, and the latest_partition_offsets and
  latest_group_offsets they keep current (`write_offsets_batch`, `write_offsets_history`);
- `commits`: the commits observed as they happen, with latest_commits (`write_commit_observations`),
  and how far the stream has read (`write_commit_mark`);
- `end_offsets`: the end offsets listed every second between two offsets cycles
  (`write_end_offset_refresh`);
- `disks`: log_dir_sizes and broker_disks (`write_log_dirs`);
- `probes`: probe_samples (`write_probe`);
- `share_groups`: the share-group tables (`write_share_groups`);
- `configs`: the topic_configs history (`record_topic_configs`);
- `recall`: the reads of the latest offsets and of the record timestamp cache, and its pruning
  (`cached_timestamps`, `cached_offset_marks`, `latest_committed`, `latest_end_offsets`,
  `prune_record_timestamps`).

`staging` is what they share: epoch-millisecond times and the staging tables a batch goes
through.

Replays: a write queued during an outage may already have been committed by an attempt whose
answer was lost, so `idempotent=True` turns every append into ``INSERT ... ON CONFLICT DO
NOTHING``. Latest rows are only ever replaced by a sample at least as new as theirs, so a replay
of an older batch cannot move them back.

Every function takes a connection inside the caller's transaction and never commits.
"""

from __future__ import annotations

from monitor.store.samples.commits import write_commit_mark, write_commit_observations
from monitor.store.samples.configs import record_topic_configs
from monitor.store.samples.disks import write_log_dirs
from monitor.store.samples.end_offsets import write_end_offset_refresh
from monitor.store.samples.offsets import (
    write_offsets_batch,
    write_offsets_history,
)
from monitor.store.samples.probes import write_probe
from monitor.store.samples.recall import (
    RecordKey,
    cached_offset_marks,
    cached_timestamps,
    latest_committed,
    latest_end_offsets,
    prune_record_timestamps,
)
from monitor.store.samples.staging import to_datetime, to_ms

__all__ = [
    "RecordKey",
    "cached_offset_marks",
    "cached_timestamps",
    "latest_committed",
    "latest_end_offsets",
    "prune_record_timestamps",
    "record_topic_configs",
    "to_datetime",
    "to_ms",
    "write_commit_mark",
    "write_commit_observations",
    "write_end_offset_refresh",
    "write_log_dirs",
    "write_offsets_batch",
    "write_offsets_history",
    "write_probe",
]

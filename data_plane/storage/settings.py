"""``LogSettings``: a partition log's configuration, typed, built from the topic config table.

The keys, defaults and validation live in ``metadata_quorum.topic_config`` (shared with the
controller); this is the same data as attributes (``segment.bytes`` -> ``segment_bytes``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

from metadata_quorum import topic_config


@dataclass(frozen=True)
class LogSettings:
    segment_bytes: int
    segment_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    retention_ms: int
    retention_bytes: int
    flush_messages: int
    flush_ms: int
    max_message_bytes: int
    message_timestamp_type: str
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    cleanup_policy: str
    compression_type: str
    delete_retention_ms: int
    min_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float

    @classmethod
    def from_config(cls, effective: Mapping[str, object]) -> "LogSettings":
        """From ``topic_config.effective(overrides)`` (every key present, values typed)."""
        wanted = {f.name for f in fields(cls)}
        return cls(**{k.replace(".", "_"): v for k, v in effective.items() if k.replace(".", "_") in wanted})  # type: ignore[arg-type]

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, str] | None = None) -> "LogSettings":
        """Defaults with the given ``key=value`` overrides (strings, as users and metadata give them)."""
        return cls.from_config(topic_config.effective(overrides or {}))

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compacted(self) -> bool:
        """Whether the log cleaner keeps only the latest record of each key (``compact`` or ``compact,delete``)."""
        return "compact" in self.cleanup_policy.split(",")

    @property
    def deletes(self) -> bool:
        """Whether retention deletes old segments (``delete`` or ``compact,delete``; not ``compact`` alone)."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def index_entries_max(self) -> int:
        """Entries either index of one segment may hold (the time index's 12-byte entries bind first)."""
        return self.segment_index_bytes // 12

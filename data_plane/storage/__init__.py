"""Partition logs on disk: segments, sparse indexes, leader-epoch cache, recovery, retention.

The broker uses ``LogManager`` (one per data directory) and ``PartitionLog`` (one per
replica); see each module's docstring for the design.
"""

from data_plane.storage.epoch_cache import LeaderEpochCache
from data_plane.storage.damage import DamagedRange
from data_plane.storage.errors import (
    CorruptBatchError,
    DamagedRangeError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from data_plane.storage.log_manager import LogManager
from data_plane.storage.partition_log import AppendResult, PartitionLog, ReadResult
from data_plane.storage.settings import LogSettings

__all__ = [
    "AppendResult",
    "CorruptBatchError",
    "DamagedRange",
    "DamagedRangeError",
    "InvalidRecordError",
    "LeaderEpochCache",
    "LogManager",
    "LogSettings",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "ReadResult",
    "RecordTooLargeError",
    "StorageError",
    "UnexpectedAppendOffsetError",
]

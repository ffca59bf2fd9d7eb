"""LogManager: every partition log in one broker data directory, and the directory's checkpoints.

Layout of ``data_dir``::

    <topic>-<partition>/                  one PartitionLog each
    recovery-point-offset-checkpoint      per partition: offsets below it were fsynced
    replication-offset-checkpoint         per partition: the high watermark the broker last saw
    .clean_shutdown                       present only while the broker is stopped cleanly; holds the
                                          broker epoch it stopped in

At start the marker decides how much to trust: present, logs load as they are; absent (a
crash), every segment above the partition's recovery point is rescanned and its torn tail
cut. The marker is deleted while the broker runs and written again by ``close``, only if
no partition went offline. It holds the broker epoch of the clean stop, which the broker
sends when it registers again (``previous_broker_epoch``, KIP-966): the controller treats
anything else as an unclean shutdown.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

import structlog

from data_plane.storage import fault_injection
from data_plane.storage.checkpoint_file import read_offsets, write_offsets
from server_common.fsync import fsync_dir
from data_plane.storage.errors import StorageError
from data_plane.storage.partition_log import PartitionLog
from data_plane.storage.settings import LogSettings

CLEAN_SHUTDOWN = ".clean_shutdown"
RECOVERY_POINTS = "recovery-point-offset-checkpoint"
HIGH_WATERMARKS = "replication-offset-checkpoint"

TopicPartition = tuple[str, int]
log = structlog.get_logger("storage")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``orders-3`` -> ("orders", 3); None for anything else."""
    topic, _, index = name.rpartition("-")
    return (topic, int(index)) if topic and index.isdigit() else None


class LogManager:
    def __init__(self, data_dir: Path, now_ms: int) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._now_ms = now_ms
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._failed: dict[TopicPartition, StorageError] = {}  # could not load at start: offline until it opens
        self._not_created: dict[TopicPartition, StorageError] = {}  # creation failed: offline until a retry succeeds
        self._offline: dict[TopicPartition, StorageError] = {}  # loaded, then failed: kept by each log's `went_offline`
        marker = self.data_dir / CLEAN_SHUTDOWN
        clean = marker.exists()
        # -1: not a clean stop (or a marker without an epoch): the controller treats it as unclean
        self.previous_broker_epoch = _marker_epoch(marker) if clean else -1
        recovery_points = self._read_recovery_points()
        for path in sorted(self.data_dir.iterdir()):
            tp = parse_partition_dir(path.name)
            if tp is not None and path.is_dir():
                self._load(tp, path, clean, recovery_points.get(tp, 0))
        log.info("logs loaded", data_dir=str(self.data_dir), partitions=len(self._logs), offline=len(self._failed), clean_shutdown=clean)
        marker.unlink(missing_ok=True)
        fsync_dir(self.data_dir)

    def _read_recovery_points(self) -> dict[TopicPartition, int]:
        """The checkpointed recovery points; none (recover everything) if the file is unreadable."""
        try:
            return read_offsets(self.data_dir / RECOVERY_POINTS)
        except ValueError as exc:
            log.warning("recovery point checkpoint unreadable: recovering every segment", error=str(exc))
            return {}

    def _load(self, tp: TopicPartition, path: Path, clean: bool, recovery_point: int) -> None:
        try:
            plog = PartitionLog.open(
                path, LogSettings.from_overrides(), self._now_ms, clean_shutdown=clean, recovery_point=recovery_point
            )
        except StorageError as exc:
            log.error("partition offline: cannot load its log", partition=path.name, error=str(exc))
            self._failed[tp] = exc
        else:
            self._hold(tp, plog)

    def _hold(self, tp: TopicPartition, plog: PartitionLog) -> None:
        """Keep ``plog`` as the log of ``tp``, and have it say when it goes offline (a log
        replaced since, by a reopen, says nothing)."""
        self._offline.pop(tp, None)
        self._logs[tp] = plog

        def went_offline(error: StorageError) -> None:
            if self._logs.get(tp) is plog:
                self._offline[tp] = error

        plog.went_offline = went_offline

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def get_or_create(self, topic: str, partition: int, settings: LogSettings) -> PartitionLog:
        """The partition's log with ``settings`` applied (logs load with defaults until the broker knows the topic's).

        A log that cannot be created (no descriptor, a full or failing disk), or that failed to
        load at start, counts as offline until a later call opens it: the metadata follower
        calls again until the cause is gone (a log that failed to load is then recovered in
        full, its recovery point unknown)."""
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is None:
            try:
                plog = PartitionLog.open(self.data_dir / partition_dir_name(topic, partition), settings, self._now_ms)
            except StorageError as exc:
                if tp not in self._failed:
                    self._not_created[tp] = exc
                raise
            self._not_created.pop(tp, None)
            self._failed.pop(tp, None)
            self._hold(tp, plog)
        else:
            plog.update_settings(settings)
        return plog

    def reopen(self, topic: str, partition: int, settings: LogSettings) -> PartitionLog:
        """The log of a replica that went offline after it was created (an append, a flush, a
        checkpoint failed), opened again once its directory takes a write again: a probe file
        written, fsynced and removed (``fault_injection`` fails it while it fails the log's
        writes), then the old files released and the log loaded as after a crash (recovered
        above its recovery point, a torn tail cut). Raises StorageError while the cause
        lasts; the offline log stays in place (and reported) until a reopen succeeds."""
        tp = (topic, partition)
        old = self._logs[tp]
        assert old.is_offline, tp
        directory = self.data_dir / partition_dir_name(topic, partition)
        _probe_writes(directory)
        old.close()
        plog = PartitionLog.open(directory, settings, self._now_ms, recovery_point=old.recovery_point)
        self._hold(tp, plog)
        log.info("partition log reopened", partition=directory.name, log_end_offset=plog.log_end_offset)
        return plog

    def delete(self, topic: str, partition: int) -> None:
        """Remove a replica's log from disk (the partition was deleted or moved away)."""
        tp = (topic, partition)
        self._not_created.pop(tp, None)
        self._offline.pop(tp, None)
        plog = self._logs.pop(tp, None)
        if plog is not None:
            plog.delete()
        elif self._failed.pop(tp, None) is not None:
            path = self.data_dir / partition_dir_name(topic, partition)
            try:
                shutil.rmtree(path)
            except OSError as exc:
                raise StorageError.from_os_error(exc, "deleting the log", path) from exc

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def not_created(self) -> list[TopicPartition]:
        """Replicas whose log creation failed and has not succeeded since."""
        return sorted(self._not_created)

    def forget_not_created(self, topic: str, partition: int) -> None:
        """The replica is no longer this broker's: stop reporting it (its creation is not retried)."""
        self._not_created.pop((topic, partition), None)

    def offline_partitions(self) -> dict[TopicPartition, StorageError]:
        """Every replica whose log is offline, and why. Kept as the logs fail, are reopened and
        deleted, not found by walking every log: every heartbeat asks, and with 50,000
        replicas the walk was a steady share of an idle broker's time."""
        return {**self._failed, **self._not_created, **self._offline}

    # ---------------------------------------------------------------- checkpoints

    def checkpoint(self) -> None:
        """Write every online log's recovery point (atomically)."""
        self.write_recovery_points(self.recovery_points())

    def recovery_points(self, logs: Iterable[tuple[TopicPartition, PartitionLog]] | None = None) -> dict[TopicPartition, int]:
        """Every online log's recovery point, to checkpoint: of ``logs`` (a `checkpoint_logs`
        list, which the broker reads in a worker thread, as it writes them with
        `write_recovery_points`), or of every log now."""
        return {tp: plog.recovery_point for tp, plog in (self._logs.items() if logs is None else logs) if not plog.is_offline}

    def checkpoint_logs(self) -> list[tuple[TopicPartition, PartitionLog]]:
        """The logs as they are now, for `recovery_points` in a worker thread: one copy of the
        index taken where logs come and go (the event loop), so the thread never walks it. Each
        recovery point is read as the thread reaches it: a value the log held, as a read on the
        loop gave, and the file was always written after it was read."""
        return list(self._logs.items())

    def write_recovery_points(self, points: dict[TopicPartition, int]) -> None:
        write_offsets(self.data_dir / RECOVERY_POINTS, points)

    def checkpoint_high_watermarks(self, high_watermarks: dict[TopicPartition, int]) -> None:
        write_offsets(self.data_dir / HIGH_WATERMARKS, high_watermarks)

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        return read_offsets(self.data_dir / HIGH_WATERMARKS)

    def close(self, broker_epoch: int = -1) -> None:
        """Flush and close every log, checkpoint, and mark the shutdown clean, with the broker
        epoch it happened in, if no log is offline."""
        for plog in self._logs.values():
            try:
                plog.close()
            except StorageError:
                pass  # offline now: no clean marker below
        self.checkpoint()
        if self.offline_partitions():
            log.warning("not marking shutdown clean: some partitions are offline", partitions=sorted(self.offline_partitions()))
            return
        fd = os.open(self.data_dir / CLEAN_SHUTDOWN, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, f"{broker_epoch}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.data_dir)


def _marker_epoch(marker: Path) -> int:
    """The broker epoch a clean-shutdown marker holds; -1 if it holds none."""
    try:
        return int(marker.read_text().strip() or -1)
    except (OSError, ValueError):
        return -1


PROBE_FILE = ".write-probe"


def _probe_writes(directory: Path) -> None:
    """Write, fsync and remove a small file in ``directory``: whether the log's writes can
    work again (a full disk, EIO, no descriptor left all fail it). Raises StorageError."""
    probe = directory / PROBE_FILE
    try:
        for operation in fault_injection.OPERATIONS:
            fault_injection.check(operation)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, b"\0" * 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise StorageError.from_os_error(exc, "reopening the log (a probe write)", directory) from exc

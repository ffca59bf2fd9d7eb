"""Micro-batch streaming reads with admission control and Trigger.AvailableNow.

Runs in Spark's long-lived driver-side Python process: initialOffset / latestOffset /
partitions / commit are called there; read() runs in workers on a pickled copy, so the
Admin connection is never pickled (it is reopened lazily where needed).
"""

from __future__ import annotations

import logging
import time

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from data_plane.client import Admin
from spark_source import offsets as offset_codec
from spark_source.options import EARLIEST, LATEST, SourceOptions
from spark_source.reader import (
    DataLossError,
    TopicPartition,
    check_data_loss,
    list_offsets,
    plan_ranges,
    read_range,
    resolve_partitions,
    resolve_start,
)

log = logging.getLogger("spark_source")

# How long partition metadata and high watermarks are reused: an idle query with a
# zero-second trigger calls latestOffset dozens of times a second.
METADATA_TTL_S = 5.0
LATEST_TTL_S = 0.25


def spread_limit(
    start: dict[TopicPartition, int], latest: dict[TopicPartition, int], max_rows: int
) -> dict[TopicPartition, int]:
    """End offsets admitting at most `max_rows` records, shared among partitions in
    proportion to their backlog (largest remainders get the leftover rows)."""
    backlog = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    share = {tp: max_rows * b // total for tp, b in backlog.items()}
    leftover = max_rows - sum(share.values())
    by_remainder = sorted(backlog, key=lambda tp: (-(max_rows * backlog[tp] % total), tp))
    for tp in by_remainder:
        if leftover <= 0:
            break
        if share[tp] < backlog[tp]:
            share[tp] += 1
            leftover -= 1
    return {tp: start.get(tp, latest[tp]) + share[tp] for tp in latest}


class KraftlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._admin: Admin | None = None
        self._tps: list[TopicPartition] | None = None
        self._tps_at = 0.0
        self._latest: dict[TopicPartition, int] = {}
        self._latest_at = 0.0
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow
        # minOffsetsPerTrigger: when the last micro-batch was let through (0: none yet, so
        # the first one never waits, as in Spark's Kafka source).
        self._last_trigger_ms = 0.0

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_admin"] = None
        return state

    # ------------------------------------------------------------------ driver side

    def _admin_client(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.opts.bootstrap)
        return self._admin

    def _partitions_now(self) -> list[TopicPartition]:
        now = time.monotonic()
        if self._tps is None or now - self._tps_at > METADATA_TTL_S:
            self._tps = resolve_partitions(self._admin_client(), self.opts)
            self._tps_at = now
        return self._tps

    def _latest_now(self) -> dict[TopicPartition, int]:
        now = time.monotonic()
        tps = self._partitions_now()
        if set(tps) != set(self._latest) or now - self._latest_at > LATEST_TTL_S:
            self._latest = list_offsets(self._admin_client(), tps, LATEST, self.opts.read_committed)
            self._latest_at = now
        return self._latest

    def initialOffset(self) -> dict:
        tps = self._partitions_now()
        return offset_codec.encode(resolve_start(self._admin_client(), tps, self.opts))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._latest_at = 0.0
        self._tps_at = -METADATA_TTL_S * 2
        self._tps = None
        self._target = dict(self._latest_now())

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offset_codec.decode(start)
        latest = dict(self._target) if self._target is not None else dict(self._latest_now())
        # Partitions new since `start` (added, or a topic matching the pattern) start at earliest.
        new = [tp for tp in latest if tp not in begin]
        if new:
            starts_new = list_offsets(self._admin_client(), new, EARLIEST)
            begin_all = {**begin, **starts_new}
        else:
            begin_all = begin
        # Never move backwards (a shrinking HW after truncation, or a vanished topic).
        latest = {tp: max(o, begin_all.get(tp, o)) for tp, o in latest.items()}
        if self._waits_for_more(begin_all, latest):
            return offset_codec.encode(begin)
        if isinstance(limit, ReadMaxRows):
            latest = spread_limit(begin_all, latest, limit.max_rows)
        end = {**begin, **latest}
        return offset_codec.encode(end)

    def _now_ms(self) -> float:
        return time.monotonic() * 1000.0

    def _waits_for_more(self, begin: dict[TopicPartition, int], latest: dict[TopicPartition, int]) -> bool:
        """minOffsetsPerTrigger: hold the micro-batch back while fewer records are new than
        that, until maxTriggerDelay has passed since the last one (never under AvailableNow)."""
        wanted = self.opts.min_offsets_per_trigger
        if not wanted or self._target is not None:
            return False
        new = sum(max(0, latest[tp] - begin.get(tp, latest[tp])) for tp in latest)
        now = self._now_ms()
        if new < wanted and now - self._last_trigger_ms < self.opts.max_trigger_delay_ms:
            return True
        if new:
            self._last_trigger_ms = now
        return False

    def reportLatestOffset(self):
        return offset_codec.encode(self._latest) if self._latest else None

    def partitions(self, start: dict, end: dict):
        begin = offset_codec.decode(start)
        finish = offset_codec.decode(end)
        if begin == finish:
            return []
        admin = self._admin_client()
        missing = [tp for tp in finish if tp not in begin]
        starts = dict(begin)
        if missing:
            starts.update(list_offsets(admin, missing, EARLIEST))
        moving = [tp for tp in finish if finish[tp] > starts.get(tp, finish[tp])]
        if moving:
            starts = check_data_loss(starts, list_offsets(admin, moving, EARLIEST), self.opts.fail_on_data_loss)
        for tp in finish:
            if tp in starts and starts[tp] > finish[tp]:
                message = f"{tp[0]}-{tp[1]}: start offset {starts[tp]} is past end offset {finish[tp]}"
                if self.opts.fail_on_data_loss:
                    raise DataLossError(message + " (partition truncated or topic recreated)")
                log.warning("%s; skipping", message)
        return plan_ranges(self.opts, starts, finish)

    def commit(self, end: dict) -> None:
        pass  # the checkpoint is the source of truth; nothing to do broker-side

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    # ------------------------------------------------------------------ worker side

    def read(self, partition):
        return read_range(partition)

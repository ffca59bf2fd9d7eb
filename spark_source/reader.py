"""Batch reads, and the pieces the stream reader shares: resolving the subscription to
topic-partitions, resolving offsets, planning ranges and reading one range."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from data_plane.client import Admin, Consumer, KraftlogError
from spark_source.arrow_rows import to_record_batch
from spark_source.options import EARLIEST, LATEST, OptionError, SourceOptions
from spark_source.worker_gc import freeze_long_lived
from server_common.errors import ErrorCode

log = logging.getLogger("spark_source")

TopicPartition = tuple[str, int]

# How a task's Consumer reads. A Consume stream (the consumer's default mode) keeps data
# flowing while the task turns the last message into Arrow; four messages of 1 MiB in flight
# cost less CPU per record than the default eight of 1 MiB (fewer messages to receive, decode
# and join) and than two of 4 MiB (each message is copied several times on its way in, and
# 1 MiB copies stay in the CPU's caches), and bound what a task receives past the end of
# its range to 4 MiB. The fetch settings apply where the consumer polls with Fetch instead
# (a broker without Consume).
READ_CONFIG = {
    "stream_window_messages": 4,
    "stream_message_bytes": 1024 * 1024,
    "fetch_max_wait_ms": 100,
    "max_partition_fetch_bytes": 8 * 1024 * 1024,
    "fetch_max_bytes": 16 * 1024 * 1024,
}


class DataLossError(RuntimeError):
    """Offsets the query needs are gone (deleted by retention, or the topic was recreated)."""


class NoOffsetForTimestampError(LookupError):
    """A partition has no record at or after startingTimestamp (and the strategy is "error")."""


class RangePartition(InputPartition):
    """One task's work: records [start, end) of one topic-partition. Everything the task
    needs travels in here (read() runs in a worker process on another reader instance)."""

    def __init__(self, bootstrap, topic, partition, start, end, include_headers, fail_on_data_loss, poll_timeout_ms, consumer_config=None):
        self.bootstrap = bootstrap
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss
        self.poll_timeout_ms = poll_timeout_ms
        self.consumer_config = consumer_config or {}

    def __repr__(self) -> str:
        return f"RangePartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


def resolve_partitions(admin: Admin, opts: SourceOptions) -> list[TopicPartition]:
    """The topic-partitions the options subscribe to, sorted."""
    if opts.assign:
        return list(opts.assign)
    if opts.subscribe:
        topics = admin.describe_topics(list(opts.subscribe))
    else:
        pattern = re.compile(opts.subscribe_pattern)
        topics = {n: t for n, t in admin.describe_topics().items() if pattern.fullmatch(n)}
    return sorted((name, p) for name, t in topics.items() for p in t.partitions)


def list_offsets(admin: Admin, tps, which: int, read_committed: bool = False) -> dict[TopicPartition, int]:
    """Log start offsets (which=-2), high watermarks (which=-1; last stable offsets with
    `read_committed`: no read goes past an open transaction) or, for a timestamp in ms, the
    first offset stamped at or after it (-1 where there is none) of `tps`."""
    tps = list(tps)
    if not tps:
        return {}
    answers = admin.list_offsets({tp: which for tp in tps}, read_committed)
    return {tp: a.offset for tp, a in answers.items()}


def resolve_offsets(admin: Admin, tps: list[TopicPartition], spec: object, read_committed: bool) -> dict[TopicPartition, int]:
    """Concrete offsets for 'earliest' / 'latest' / {tp: offset or -2/-1}; partitions a
    JSON spec leaves out start at earliest."""
    if spec == "earliest":
        return list_offsets(admin, tps, EARLIEST)
    if spec == "latest":
        return list_offsets(admin, tps, LATEST, read_committed)
    wanted = {tp: spec.get(tp, EARLIEST) for tp in tps}
    out = {tp: o for tp, o in wanted.items() if o >= 0}
    for which in (EARLIEST, LATEST):
        out.update(list_offsets(admin, [tp for tp, o in wanted.items() if o == which], which, read_committed))
    return out


def _by_timestamp(admin: Admin, tps: list[TopicPartition], timestamps: dict, name: str) -> dict[TopicPartition, int]:
    """ListOffsets by time for every partition of `tps` with its own timestamp; like Spark's
    Kafka source, a per-partition option must name every partition (-1 where none is found)."""
    missing = sorted(set(tps) - set(timestamps))
    if missing:
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        raise OptionError(f"option {name!r} must give a timestamp for every partition read; it leaves out {names}")
    found = {tp: -1 for tp in tps}
    for ts in sorted({timestamps[tp] for tp in tps}):
        found.update(list_offsets(admin, [tp for tp in tps if timestamps[tp] == ts], ts))
    return found


def resolve_start(admin: Admin, tps: list[TopicPartition], opts: SourceOptions) -> dict[TopicPartition, int]:
    """Where a new query starts: each partition's first offset stamped at or after
    startingTimestamp or its startingOffsetsByTimestamp entry (ListOffsets by time) when
    one is set, else startingOffsets."""
    if opts.starting_timestamp is not None:
        found = list_offsets(admin, tps, opts.starting_timestamp)
        wanted = f"startingTimestamp={opts.starting_timestamp}"
    elif opts.starting_by_timestamp is not None:
        found = _by_timestamp(admin, tps, opts.starting_by_timestamp, "startingOffsetsByTimestamp")
        wanted = "the partition's startingOffsetsByTimestamp"
    else:
        return resolve_offsets(admin, tps, opts.starting_offsets, opts.read_committed)
    missing = sorted(tp for tp, offset in found.items() if offset < 0)
    if missing and opts.timestamp_strategy == "error":
        names = ", ".join(f"{t}-{p}" for t, p in missing)
        raise NoOffsetForTimestampError(
            f"no record at or after {wanted} in {names}; set "
            "startingOffsetsByTimestampStrategy=latest to start such partitions at their latest offset"
        )
    return {**found, **list_offsets(admin, missing, LATEST, opts.read_committed)}


def resolve_end(admin: Admin, tps: list[TopicPartition], opts: SourceOptions) -> dict[TopicPartition, int]:
    """Where a batch query ends (exclusive), never past the high watermark (the last stable
    offset when reading committed data): before each partition's first record stamped at or
    after endingTimestamp or its endingOffsetsByTimestamp entry (the high watermark where
    there is none), else endingOffsets."""
    hws = list_offsets(admin, tps, LATEST, opts.read_committed)
    if opts.ending_timestamp is not None:
        ends = list_offsets(admin, tps, opts.ending_timestamp)
    elif opts.ending_by_timestamp is not None:
        ends = _by_timestamp(admin, tps, opts.ending_by_timestamp, "endingOffsetsByTimestamp")
    else:
        ends = resolve_offsets(admin, tps, opts.ending_offsets, opts.read_committed)
    return {tp: hws[tp] if ends.get(tp, -1) < 0 else min(ends[tp], hws[tp]) for tp in tps}


def check_data_loss(
    starts: dict[TopicPartition, int], log_starts: dict[TopicPartition, int], fail: bool
) -> dict[TopicPartition, int]:
    """Moves starts below the log start offset up to it (failOnDataLoss=false) or fails."""
    adjusted = dict(starts)
    for tp, start in starts.items():
        log_start = log_starts.get(tp)
        if log_start is not None and start < log_start:
            message = (
                f"{tp[0]}-{tp[1]}: offsets {start}..{log_start - 1} are no longer available "
                f"(log start offset is {log_start}); they were deleted by retention or the topic "
                "was recreated. Set failOnDataLoss=false to skip them."
            )
            if fail:
                raise DataLossError(message)
            log.warning("%s Skipping (failOnDataLoss=false).", message)
            adjusted[tp] = log_start
    return adjusted


def plan_ranges(
    opts: SourceOptions, starts: dict[TopicPartition, int], ends: dict[TopicPartition, int]
) -> list[RangePartition]:
    """One partition per non-empty topic-partition range, split further so there are at
    least minPartitions (pieces proportional to each range's size) and none holds more than
    maxRecordsPerPartition records."""
    ranges = [(tp, starts[tp], ends[tp]) for tp in sorted(ends) if tp in starts and ends[tp] > starts[tp]]
    total = sum(e - s for _, s, e in ranges)
    want = opts.min_partitions or 0
    out: list[RangePartition] = []
    for (topic, p), s, e in ranges:
        pieces = 1
        if want > len(ranges) and total:
            pieces = max(1, min(e - s, round(want * (e - s) / total)))
        if opts.max_records_per_partition:
            pieces = max(pieces, -(-(e - s) // opts.max_records_per_partition))
        step, extra = divmod(e - s, pieces)
        lo = s
        for i in range(pieces):
            hi = lo + step + (1 if i < extra else 0)
            out.append(
                RangePartition(
                    opts.bootstrap, topic, p, lo, hi, opts.include_headers, opts.fail_on_data_loss, opts.poll_timeout_ms, opts.consumer_config
                )
            )
            lo = hi
    return out


def read_range(part: RangePartition) -> Iterator:
    """Yields pyarrow RecordBatches of records [part.start, part.end) of one partition."""
    freeze_long_lived()
    tp = (part.topic, part.partition)
    position = part.start
    if position >= part.end:
        return
    config = {**READ_CONFIG, **part.consumer_config}
    with Consumer(part.bootstrap, **config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, position)
        deadline = time.monotonic() + part.poll_timeout_ms / 1000.0
        while position < part.end:
            try:
                polled = consumer.poll_batches(timeout_ms=200, fetch_ahead=False)
            except KraftlogError as err:
                if err.error is not ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                log_start = _log_start(part.bootstrap, tp)
                if position >= log_start:
                    raise
                check_data_loss({tp: position}, {tp: log_start}, part.fail_on_data_loss)
                position = min(log_start, part.end)
                consumer.seek(tp, position)
                continue
            batches = polled.get(tp)
            if not batches:
                # read_committed: markers and aborted records are skipped, not returned; the
                # consumer's position still moves past them, possibly to the range's end.
                position = max(position, consumer.position(tp))
                if position >= part.end:
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{part.topic}-{part.partition}: no records at offset {position} (want up to {part.end}) "
                        f"for pollTimeoutMs={part.poll_timeout_ms}"
                    )
                continue
            deadline = time.monotonic() + part.poll_timeout_ms / 1000.0
            # Offsets inside a batch are consecutive, so headers say how many records precede
            # part.end: whole batches past it are dropped, the last one is cut in Arrow (no copy).
            kept = [b for b in batches if b.header.base_offset < part.end]
            rows = sum(min(b.header.next_offset, part.end) - b.header.base_offset for b in kept)
            position = max(position, batches[-1].header.next_offset)  # gaps (compaction, control batches) are normal
            if position < part.end:
                consumer.fetch_ahead()  # the next fetch travels while this one becomes Arrow
            if rows:
                arrow = to_record_batch(part.topic, part.partition, kept, part.include_headers)
                yield arrow.slice(0, rows) if rows < arrow.num_rows else arrow


def _log_start(bootstrap: str, tp: TopicPartition) -> int:
    with Admin(bootstrap) as admin:
        return admin.list_offsets({tp: EARLIEST})[tp].offset


class KraftlogBatchReader(DataSourceReader):
    """spark.read.format("kraftlog"): plans [startingOffsets, endingOffsets) per partition."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self):
        opts = self.opts
        with Admin(opts.bootstrap) as admin:
            tps = resolve_partitions(admin, opts)
            starts = resolve_start(admin, tps, opts)
            ends = resolve_end(admin, tps, opts)
            starts = check_data_loss(starts, list_offsets(admin, tps, EARLIEST), opts.fail_on_data_loss)
        for tp in tps:
            if starts[tp] > ends[tp]:
                message = f"{tp[0]}-{tp[1]}: starting offset {starts[tp]} is past the ending offset {ends[tp]}"
                if opts.fail_on_data_loss:
                    raise DataLossError(message)
                log.warning("%s; reading nothing from it", message)
        parts = plan_ranges(opts, starts, ends)
        return parts or [RangePartition(opts.bootstrap, "", 0, 0, 0, False, True, 1)]

    def read(self, partition):
        return read_range(partition)

"""Log compaction throughput:

    python -m pytest -m benchmark tests/integration/test_compaction_benchmark.py -s

``test_cleaner_throughput``: one cleaning pass (no I/O throttle) over a keyed log of
LOG_MIB MiB (KEYS keys overwritten again and again, 1 MiB segments), in MiB of log cleaned
per second, and how much of it the pass removed.

``test_produce_while_cleaning``: produce throughput (Python producer, acks=1, 100-byte
records) on a one-broker cluster to a plain topic, while the broker's cleaner is idle and
while it cleans a large dirty compacted topic at its default I/O rate. Goal (issue 12): no
more than 20% lower while cleaning.

The machine is shared: compare figures of one run with each other.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from data_plane.client import Producer
from data_plane.record_batch import encode_batch
from data_plane.storage import LogSettings, PartitionLog
from data_plane.storage.log_cleaner import CleaningPass
from tests.cluster import TestCluster, local_cluster

pytestmark = [pytest.mark.benchmark, pytest.mark.integration, pytest.mark.timeout(1800)]

LOG_MIB = 64
KEYS = 20_000
VALUE_BYTES = 200
BATCH_RECORDS = 500
PRODUCE_RECORDS = 200_000


def keyed_batches(total_bytes: int):
    """Batches of BATCH_RECORDS records cycling over KEYS keys, about ``total_bytes`` in all."""
    written, n = 0, 0
    while written < total_bytes:
        keys = [b"key-%08d" % ((n + i) % KEYS) for i in range(BATCH_RECORDS)]
        batch = encode_batch([b"v" * VALUE_BYTES] * BATCH_RECORDS, keys, timestamps_ms=1_000)
        written, n = written + len(batch), n + BATCH_RECORDS
        yield batch


def test_cleaner_throughput(tmp_path: Path) -> None:
    settings = LogSettings.from_overrides({"cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0"})
    plog = PartitionLog.open(tmp_path / "keyed-0", settings, 0)
    for batch in keyed_batches(LOG_MIB << 20):
        plog.append(batch, assign_offsets=True, leader_epoch=0, now_ms=0)
    plog.flush()
    size_before = plog.size_bytes
    due = plog.cleaning_candidates(plog.log_end_offset, 10_000)
    started = time.perf_counter()
    result = CleaningPass(plog.directory, *due, map_entries=KEYS * 2, tombstone_horizon_ms=0, aborted=()).run()
    plog.install_cleaned(result)
    elapsed = time.perf_counter() - started
    print(f"\ncleaner (load average {os.getloadavg()[0]:.1f}): {size_before / 2**20:.0f} MiB in {elapsed:.1f} s = "
          f"{size_before / 2**20 / elapsed:.1f} MiB/s of log; {result.records_removed} records removed, "
          f"{result.records_kept} kept; log now {plog.size_bytes / 2**20:.1f} MiB")
    assert result.records_kept >= KEYS and plog.size_bytes < size_before
    plog.close()


def produce_rate(cluster: TestCluster, topic: str, count: int) -> float:
    value = bytes(100)
    started = time.perf_counter()
    with Producer(cluster.bootstrap, acks=1) as producer:
        for _ in range(count):
            producer.send(topic, value=value, partition=0)
        producer.flush()
    return count / (time.perf_counter() - started)


def test_produce_while_cleaning(tmp_path_factory) -> None:
    with local_cluster(tmp_path_factory.mktemp("compaction-bench"), controllers=1, brokers=1,
                       broker_args=["--cleaner-interval-ms", "200"]) as cluster:
        cluster.create_topic("plain", 1, 1)
        cluster.create_topic("keyed", 1, 1, {"cleanup.policy": "compact", "segment.bytes": str(1 << 20),
                                             "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "3600000"})
        produce_rate(cluster, "plain", PRODUCE_RECORDS)  # warm-up: connections, the first segments
        idle = produce_rate(cluster, "plain", PRODUCE_RECORDS)
        with Producer(cluster.bootstrap, acks=1, linger_ms=5) as producer:
            for batch_keys in range(0, (LOG_MIB << 20) // (VALUE_BYTES + 20), BATCH_RECORDS):
                producer.send_batch("keyed", 0, [b"v" * VALUE_BYTES] * BATCH_RECORDS,
                                    [b"key-%08d" % ((batch_keys + i) % KEYS) for i in range(BATCH_RECORDS)])
            producer.flush()
        # the lag kept the cleaner off while filling; lifting it starts a pass over LOG_MIB MiB
        with cluster.controller_client() as client:
            client.alter_configs("keyed", {"min.compaction.lag.ms": "0"})
        directory = next((cluster.data_dir / cluster.broker(1).name).rglob("keyed-0"))
        deadline = time.monotonic() + 60
        while not any(directory.glob("*.cleaned")) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling a file for the benchmark's start, not a synchronization
        cleaning = produce_rate(cluster, "plain", PRODUCE_RECORDS)
        still_cleaning = any(directory.glob("*.cleaned"))
        print(f"\nproduce (load average {os.getloadavg()[0]:.1f}): idle cleaner {idle:,.0f} records/s, "
              f"while cleaning {cleaning:,.0f} records/s ({cleaning / idle - 1:+.0%}); "
              f"cleaner still running at the end: {still_cleaning}")

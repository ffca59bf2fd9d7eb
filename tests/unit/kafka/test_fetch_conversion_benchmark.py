"""What a cold fetch costs the Kafka door per record, in-process (docs/kafka.md, "Performance"):
stored lz4 batches of 100-byte records converted to Kafka batches with an empty cache, as a
consumer reading them for the first time makes the door do. Batch sizes around what
librdkafka's and kraftlog's producers write; the best of a few passes, since the machine is
shared:

    python -m pytest -m benchmark tests/unit/kafka/test_fetch_conversion_benchmark.py -s
"""

from __future__ import annotations

import os
import time

import pytest

from data_plane import record_batch
from data_plane.kafka.batches import ConvertedBatches

pytestmark = pytest.mark.benchmark

RECORDS = 300_000
PASSES = 5
FETCH_BYTES = 1 << 20  # librdkafka's max.partition.fetch.bytes


def _stored(per_batch: int) -> list[bytes]:
    """Fetch-sized reads of stored lz4 batches, at consecutive offsets."""
    batches = []
    for base in range(0, RECORDS, per_batch):
        raw = bytearray(record_batch.encode_batch([bytes(100)] * per_batch, compression="lz4",
                                                  timestamps_ms=[1_700_000_000_000 + i for i in range(per_batch)]))
        record_batch.stamp_batch(raw, 0, base, 0)
        batches.append(bytes(raw))
    per_read = max(1, FETCH_BYTES // (per_batch * 100))
    return [b"".join(batches[i:i + per_read]) for i in range(0, len(batches), per_read)]


@pytest.mark.parametrize("per_batch", [150, 1_000, 5_000])
def test_cold_fetch_conversion_per_record(per_batch: int) -> None:
    reads = _stored(per_batch)
    took = []
    for _ in range(PASSES):
        cold = ConvertedBatches(64 << 20)
        started = time.perf_counter()
        converted = sum(len(cold.to_kafka(read)) for read in reads)
        took.append(time.perf_counter() - started)
    print(f"\n{per_batch:>5} records per batch: {min(took) / RECORDS * 1e6:.2f} µs per record cold "
          f"(load average {os.getloadavg()[0]:.2f})")
    assert converted > 0

"""Size and cost of the controller's metadata snapshot (pysyncobj's full dump) at 10,000 and
100,000 partitions, in process: no cluster, the pure state machine only.

    flock /tmp/kraftlog-bench.lock python -m pytest -m benchmark tests/unit/metadata/test_snapshot_size.py -s

What a log compaction costs the controller: ``MetadataStateMachine._serialize`` runs on the
Raft thread (``useFork=False``), and so does pysyncobj's gzip+pickle of the result into
``raft.dump`` (its serializer writes the file inline when it does not fork). Both block
heartbeats: their sum is the stall a compaction puts on the Raft thread. Loading is the same
path a restarted controller, or a new one that received the dump in chunks, runs: gunzip,
unpickle, ``_deserialize``. The cluster is RF 3 on 3 brokers, topics of 2,500 partitions.
Checks the loaded image equals the dumped one (same offset, same topics), so it can fail.
"""

from __future__ import annotations

import gzip
import io
import pickle
import time

import pytest

from metadata_quorum.delta import apply_all
from metadata_quorum.raft_node import MetadataStateMachine
from metadata_quorum.records import PartitionChangeRecord
from tests.unit.metadata.test_apply_rate import cluster_image

pytestmark = pytest.mark.benchmark

PER_TOPIC = 2_500


def _state_machine() -> MetadataStateMachine:
    return MetadataStateMachine("bench", lambda *_: None, lambda *_: None)


@pytest.mark.parametrize("partitions", [10_000, 100_000])
def test_snapshot_size_and_cost(partitions: int) -> None:
    source = _state_machine()
    source.image = cluster_image(partitions // PER_TOPIC, PER_TOPIC)

    started = time.process_time()
    data = source._serialize()
    serialize_s = time.process_time() - started
    started = time.process_time()
    with io.BytesIO() as buffer:
        with gzip.GzipFile(fileobj=buffer, mode="wb") as g:
            pickle.dump(data, g)
        dump = buffer.getvalue()
    write_s = time.process_time() - started

    target = _state_machine()
    started = time.process_time()
    with gzip.GzipFile(fileobj=io.BytesIO(dump), mode="rb") as g:
        target._deserialize(pickle.load(g))
    load_s = time.process_time() - started

    assert target.image.offset == source.image.offset
    assert target.image.topics == source.image.topics

    source.image = apply_all(source.image, [PartitionChangeRecord("id0", 0, 0, isr=(1, 2))])  # one topic moved since
    started = time.process_time()
    again = source._serialize()
    next_s = time.process_time() - started
    assert len(again["records"]) == len(data["records"])
    target.image = apply_all(target.image, [PartitionChangeRecord("id0", 0, 0, isr=(1, 2))])  # the loaded one's first compaction
    started = time.process_time()
    after_load = target._serialize()
    after_load_s = time.process_time() - started
    assert after_load["records"] == again["records"]
    print(f"\n{partitions:>7} partitions: dump {len(dump) / 1e6:.2f} MB gzipped, {len(data['records'])} records; "
          f"_serialize {serialize_s * 1000:.0f} ms the first time, {next_s * 1000:.0f} ms the next (one topic changed), "
          f"{after_load_s * 1000:.0f} ms the first time after a load; "
          f"gzip+pickle {write_s * 1000:.0f} ms; load {load_s * 1000:.0f} ms (CPU)")

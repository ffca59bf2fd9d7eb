"""Size and cost of the controller's metadata snapshot (pysyncobj's full dump) at 10,000 and
100,000 partitions, in process: no cluster, the pure state machine only.

    flock /tmp/kraftlog-bench.lock python -m pytest -m benchmark tests/unit/metadata/test_snapshot_size.py -s

What a log compaction costs the controller (metadata_quorum/raft_dump.py): on the Raft thread
only ``capture_dump`` (holding the image); in the dump's writer thread the encoding
(``SnapshotEncoder``: only what changed since the last dump) and the file's bytes (pickle and
lz4; before, pysyncobj's gzip and pickle, on the Raft thread, printed beside them). Loading is
the path a restarted controller, or a new one that received the dump in chunks, runs on the
Raft thread: ``read_dump`` and ``load_dump``. The cluster is RF 3 on 3 brokers, topics of 2,500
partitions. Checks the loaded image equals the dumped one (same offset, same topics), so it can fail.
"""

from __future__ import annotations

import gzip
import io
import pickle
import time

import pytest

from metadata_quorum.delta import apply_all
from metadata_quorum.raft_dump import dump_bytes, read_dump
from metadata_quorum.raft_node import MetadataStateMachine
from metadata_quorum.records import PartitionChangeRecord
from tests.unit.metadata.test_apply_rate import cluster_image

pytestmark = pytest.mark.benchmark

PER_TOPIC = 2_500


def _state_machine() -> MetadataStateMachine:
    return MetadataStateMachine("bench", lambda *_: None, lambda *_: None)


@pytest.mark.parametrize("partitions", [10_000, 100_000])
def test_snapshot_size_and_cost(partitions: int, tmp_path) -> None:
    source = _state_machine()
    source.image = cluster_image(partitions // PER_TOPIC, PER_TOPIC)

    started = time.process_time()
    encode = source.capture_dump()
    capture_s = time.process_time() - started
    started = time.process_time()
    data = encode()
    serialize_s = time.process_time() - started
    raft = ((b"entry", 2, 1), (b"entry", 1, 1), set())
    started = time.process_time()
    dump = dump_bytes(data, raft)
    write_s = time.process_time() - started
    started = time.process_time()
    with io.BytesIO() as buffer:
        with gzip.GzipFile(fileobj=buffer, mode="wb") as g:
            pickle.dump(([{}, data], *raft), g)
        gzipped = buffer.getvalue()
    gzip_s = time.process_time() - started
    path = tmp_path / "raft.dump"
    path.write_bytes(dump)

    target = _state_machine()
    started = time.process_time()
    state, _ = read_dump(path)
    target.load_dump(state)
    load_s = time.process_time() - started

    assert target.image.offset == source.image.offset
    assert target.image.topics == source.image.topics

    source.image = apply_all(source.image, [PartitionChangeRecord("id0", 0, 0, isr=(1, 2))])  # one topic moved since
    started = time.process_time()
    again = source.capture_dump()()
    next_s = time.process_time() - started
    assert len(again["records"]) == len(data["records"])
    target.image = apply_all(target.image, [PartitionChangeRecord("id0", 0, 0, isr=(1, 2))])  # the loaded one's first compaction
    started = time.process_time()
    after_load = target.capture_dump()()
    after_load_s = time.process_time() - started
    assert after_load["records"] == again["records"]
    print(f"\n{partitions:>7} partitions: dump {len(dump) / 1e6:.2f} MB (lz4; gzipped {len(gzipped) / 1e6:.2f} MB), {len(data['records'])} records; "
          f"on the Raft thread: capture {capture_s * 1e6:.0f} us; in the writer: encoding {serialize_s * 1000:.0f} ms the first time, "
          f"{next_s * 1000:.0f} ms the next (one topic changed), {after_load_s * 1000:.0f} ms the first time after a load; "
          f"pickle+lz4 {write_s * 1000:.0f} ms (gzip+pickle was {gzip_s * 1000:.0f} ms); load {load_s * 1000:.0f} ms (CPU)")

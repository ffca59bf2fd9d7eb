"""Metadata apply rate of the pure state machine, in records per CPU second.

    python -m pytest -m benchmark tests/unit/metadata/test_apply_rate.py -s

A cluster image of 10,000 partitions at replication factor 3 on 3 brokers, laid out three
ways (one topic of 10,000 partitions, 100 topics of 100, 10,000 topics of one), takes a
stream of 20,000 partition-change records (ISR shrinks and expansions, each based on the
partition's current epoch). The stream is replayed in batches of 1 to 5,000 records, each
batch through one delta applied once (``apply_all``: what the controller does per Raft entry
and a broker per metadata batch; the metadata stream sends up to 5,000 records a batch).
CPU time of this process, not wall time: the machine is shared, and the figure should not
count time other processes held the cores.
"""

from __future__ import annotations

import time

import pytest

from metadata_quorum.delta import apply_all
from metadata_quorum.image import MetadataImage
from metadata_quorum.records import PartitionChangeRecord, PartitionRecord, Record, RegisterBrokerRecord, TopicRecord, UnfenceBrokerRecord

pytestmark = pytest.mark.benchmark

PARTITIONS = 10_000
RECORDS = 20_000
LAYOUTS = [(1, 10_000), (100, 100), (10_000, 1)]  # topics, partitions per topic
BATCHES = [1, 10, 100, 1_000, 5_000]


def cluster_image(topics: int, per_topic: int) -> MetadataImage:
    """3 unfenced brokers and ``topics`` topics of ``per_topic`` partitions, leaders spread."""
    image = apply_all(MetadataImage.empty("bench"), [RegisterBrokerRecord(b, b, "127.0.0.1", 9000 + b, "", f"i{b}") for b in (1, 2, 3)])
    image = apply_all(image, [UnfenceBrokerRecord(b, b) for b in (1, 2, 3)])
    for t in range(topics):
        replicas = [tuple((n + k) % 3 + 1 for k in range(3)) for n in range(per_topic)]
        image = apply_all(image, [*(PartitionRecord(f"id{t}", n, rs, rs, rs[0], 0, 0) for n, rs in enumerate(replicas)), TopicRecord(f"t{t}", f"id{t}")])
    return image


def isr_changes(image: MetadataImage, count: int) -> list[Record]:
    """Shrink each partition's ISR to its leader, expand it again, and so on, partition after
    partition round the cluster."""
    parts = [(topic.topic_id, p) for topic in image.topics.values() for p in topic.partitions.values()]
    epochs = [0] * len(parts)
    out: list[Record] = []
    for i in range(count):
        k = i % len(parts)
        topic_id, p = parts[k]
        out.append(PartitionChangeRecord(topic_id, p.partition, epochs[k], isr=(p.leader,) if epochs[k] % 2 == 0 else p.replicas))
        epochs[k] += 1
    return out


@pytest.mark.parametrize("topics,per_topic", LAYOUTS)
def test_partition_change_apply_rate(topics: int, per_topic: int) -> None:
    base = cluster_image(topics, per_topic)
    assert sum(len(t.partitions) for t in base.topics.values()) == PARTITIONS
    stream = isr_changes(base, RECORDS)
    for batch in BATCHES:
        image = base
        started = time.process_time()
        for first in range(0, len(stream), batch):
            image = apply_all(image, stream[first : first + batch])
        cpu_s = time.process_time() - started
        print(f"{topics} topic(s) x {per_topic} partitions, batches of {batch}: {len(stream) / cpu_s:,.0f} records/s ({cpu_s:.2f} CPU s)")
        assert image.offset == base.offset + RECORDS
        changes_per_partition = RECORDS // PARTITIONS
        assert all(p.partition_epoch == changes_per_partition for t in image.topics.values() for p in t.partitions.values())

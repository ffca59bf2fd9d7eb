"""A restarting broker streams the metadata log from its start and sees every old leadership
go by. A leader epoch older than the newest epoch in the replica's own log is history: acting
on it (leading in it) would assign that old epoch at the log end and erase the epoch history
written after it, and followers would then truncate by the wrong history (after a full
restart, followers cut thousands of records and fetched them again, over and over)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from data_plane.broker.config import BrokerConfig
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.storage import LogManager
from metadata_quorum.delta import MetadataDelta
from metadata_quorum.image import MetadataImage, PartitionImage
from tests.unit.metadata.helpers import cluster, with_topic
from tests.unit.storage.conftest import batch

BASE = with_topic(cluster((1, 2)), "t", 1, 2)


def with_partition(image: MetadataImage, part: PartitionImage) -> MetadataImage:
    """``image`` with t-0 replaced by ``part``."""
    topic = replace(image.topics["t"], partitions={0: part})
    return replace(image, topics={"t": topic}, topics_by_id={topic.topic_id: topic})


def at_epoch(leader: int, leader_epoch: int) -> MetadataImage:
    """BASE with partition t-0 led by ``leader`` in ``leader_epoch``."""
    return with_partition(BASE, replace(BASE.topics["t"].partitions[0], leader=leader, leader_epoch=leader_epoch, partition_epoch=leader_epoch, isr=(1, 2)))


def broker(data_dir: Path) -> ReplicaManager:
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=1, data_dir=data_dir, controllers=[])
    return ReplicaManager(config, LogManager(data_dir, now_ms=0))


def apply(replicas: ReplicaManager, image: MetadataImage) -> None:
    """Hand ``image`` to the broker as a metadata snapshot would."""
    previous = replicas.image or MetadataImage.empty(image.cluster_id)
    asyncio.run(replicas.on_metadata(MetadataDelta.from_snapshot(previous, image), image))


def lead_and_write(replicas: ReplicaManager, image: MetadataImage, records: int) -> None:
    apply(replicas, image)
    partition = replicas.partitions[("t", 0)]
    assert partition.is_leader
    partition.log.append(batch(records), assign_offsets=True, leader_epoch=partition.state.leader_epoch, now_ms=0)


def test_replayed_old_leaderships_leave_the_epoch_history_alone(tmp_path: Path) -> None:
    first = broker(tmp_path)
    lead_and_write(first, at_epoch(1, 0), 5)
    apply(first, at_epoch(2, 1))
    lead_and_write(first, at_epoch(1, 3), 4)
    history = first.partitions[("t", 0)].log.leader_epoch_cache.entries
    assert history == [(0, 0), (3, 5)]
    first.logs.close()

    restarted = broker(tmp_path)  # metadata arrives from the start of the log again
    apply(restarted, at_epoch(1, 0))
    partition = restarted.partitions[("t", 0)]
    assert not partition.is_leader and partition.log.leader_epoch_cache.entries == history
    apply(restarted, at_epoch(2, 1))
    apply(restarted, at_epoch(1, 3))
    assert partition.is_leader and partition.log.leader_epoch_cache.entries == history
    apply(restarted, at_epoch(1, 4))
    assert partition.is_leader and partition.log.leader_epoch_cache.entries == history + [(4, 9)]

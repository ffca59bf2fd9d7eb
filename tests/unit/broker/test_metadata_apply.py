"""The broker applies metadata in proportion to what changed: only topics and partitions
that differ from the last image it applied in full are looked at, and an apply that failed
half way is completed by the next one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from data_plane.broker.config import BrokerConfig
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.storage import LogManager
from metadata_quorum.delta import apply_all
from metadata_quorum.image import MetadataImage
from metadata_quorum.records import PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord

PARTITIONS = 60


def image_with_topic() -> MetadataImage:
    image = apply_all(MetadataImage.empty("c"), [RegisterBrokerRecord(b, -1, "127.0.0.1", 9000 + b, "", f"i{b}", fenced=False) for b in (1, 2, 3)])
    partitions = [PartitionRecord("tid", p, (2, 1, 3), (2, 1, 3), 2, 0, 0) for p in range(PARTITIONS)]
    return apply_all(image, [*partitions, TopicRecord("t", "tid")])


class Counting(ReplicaManager):
    """Counts what on_metadata does to replicas."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.added = self.changed = self.fetcher_syncs = 0
        self.fail_adds = 0
        self.followers_changed = self._count_sync

    def _count_sync(self) -> None:
        self.fetcher_syncs += 1

    def _add_partition(self, *args) -> None:
        if self.fail_adds:
            self.fail_adds -= 1
            raise OSError("disk hiccup")
        self.added += 1
        super()._add_partition(*args)

    def _change_leadership(self, *args) -> None:
        self.changed += 1
        super()._change_leadership(*args)


@pytest.fixture
def manager(tmp_path: Path) -> Counting:
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=9001, data_dir=tmp_path, controllers=[])
    return Counting(config, LogManager(tmp_path, now_ms=0))


def test_one_partition_change_touches_one_partition(manager: Counting) -> None:
    image = image_with_topic()
    asyncio.run(manager.on_metadata(image))
    assert (manager.added, manager.changed, len(manager.partitions)) == (PARTITIONS, 0, PARTITIONS)
    syncs = manager.fetcher_syncs
    shrunk = apply_all(image, [PartitionChangeRecord("tid", 7, 0, isr=(2, 1))])
    asyncio.run(manager.on_metadata(shrunk))
    assert (manager.added, manager.changed) == (PARTITIONS, 1)
    assert manager.partitions[("t", 7)].state.isr == (2, 1)
    assert manager.fetcher_syncs == syncs  # same leader: the fetchers have nothing to redo
    moved = apply_all(shrunk, [PartitionChangeRecord("tid", 8, 0, leader=1)])
    asyncio.run(manager.on_metadata(moved))
    assert manager.changed == 2 and manager.fetcher_syncs == syncs + 1
    assert manager.partitions[("t", 8)].is_leader


def test_unchanged_image_does_nothing(manager: Counting) -> None:
    image = image_with_topic()
    asyncio.run(manager.on_metadata(image))
    before = (manager.added, manager.changed, manager.fetcher_syncs)
    asyncio.run(manager.on_metadata(apply_all(image, [RegisterBrokerRecord(4, -1, "h", 1, "", "i4")])))
    assert (manager.added, manager.changed) == before[:2]


def test_a_failed_apply_is_completed_by_the_next(manager: Counting) -> None:
    image = image_with_topic()
    manager.fail_adds = 1
    with pytest.raises(OSError):
        asyncio.run(manager.on_metadata(image))
    assert len(manager.partitions) < PARTITIONS
    asyncio.run(manager.on_metadata(image))
    assert len(manager.partitions) == PARTITIONS


def test_deleted_topic_loses_its_replicas(manager: Counting) -> None:
    image = image_with_topic()
    asyncio.run(manager.on_metadata(image))
    assert len(list(manager.logs.data_dir.glob("t-*"))) == PARTITIONS
    asyncio.run(manager.on_metadata(apply_all(image, [RemoveTopicRecord("tid")])))
    assert not manager.partitions and not list(manager.logs.data_dir.glob("t-*"))

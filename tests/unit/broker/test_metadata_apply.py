"""The broker applies metadata in proportion to what changed: only the partitions a metadata
delta says changed are looked at, and an apply that failed half way is completed when the
same delta comes again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import structlog.testing

from data_plane.broker import controller_link
from data_plane.broker.config import BrokerConfig
from data_plane.broker.controller_link import MetadataFollower, MetadataNotApplied
from data_plane.broker.replica_manager import ReplicaManager
from data_plane.storage import LogManager
from metadata_quorum.delta import MetadataDelta, apply_all
from metadata_quorum.image import MetadataImage, image_to_records
from kraftlog_proto import controller_pb2 as pb
from metadata_quorum.records import to_proto
from server_common.waiting import async_wait_for
from metadata_quorum.records import ConfigRecord, PartitionChangeRecord, PartitionRecord, RegisterBrokerRecord, RemoveTopicRecord, TopicRecord
from tests.unit.storage.conftest import batch

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
        self.moved: list = []  # what each sync named (None: every partition)
        self.fail_adds = 0
        self.followers_changed = self._count_sync
        self.rechecked: list[set] = []
        self.recheck_followers = self.rechecked.append

    def _count_sync(self, changed) -> None:
        self.fetcher_syncs += 1
        self.moved.append(changed)

    def _add_partition(self, *args) -> None:
        if self.fail_adds:
            self.fail_adds -= 1
            raise OSError("disk hiccup")
        self.added += 1
        super()._add_partition(*args)

    def _change_leadership(self, *args) -> None:
        self.changed += 1
        super()._change_leadership(*args)


def step(manager: ReplicaManager, image: MetadataImage, records: list) -> MetadataImage:
    """Replay ``records`` onto ``image`` as one metadata batch and hand the delta to the broker."""
    delta = MetadataDelta(image)
    delta.replay_all(records)
    after = delta.apply()
    asyncio.run(manager.on_metadata(delta, after))
    return after


def start(manager: ReplicaManager) -> MetadataImage:
    """The broker's first metadata: the topic, as a snapshot brings it."""
    image = image_with_topic()
    asyncio.run(manager.on_metadata(MetadataDelta.from_snapshot(MetadataImage.empty("c"), image), image))
    return image


@pytest.fixture
def manager(tmp_path: Path) -> Counting:
    config = BrokerConfig(broker_id=1, host="127.0.0.1", port=9001, data_dir=tmp_path, controllers=[])
    return Counting(config, LogManager(tmp_path, now_ms=0))


def test_one_partition_change_touches_one_partition(manager: Counting) -> None:
    image = start(manager)
    assert (manager.added, manager.changed, len(manager.partitions)) == (PARTITIONS, 0, PARTITIONS)
    syncs = manager.fetcher_syncs
    shrunk = step(manager, image, [PartitionChangeRecord("tid", 7, 0, isr=(2, 1))])
    assert (manager.added, manager.changed) == (PARTITIONS, 1)
    assert manager.partitions[("t", 7)].state.isr == (2, 1)
    assert manager.fetcher_syncs == syncs  # same leader: no full resync of the fetchers ...
    assert manager.rechecked == [{("t", 7)}]  # ... but the fetcher of a followed partition looks at it now
    led = step(manager, shrunk, [PartitionChangeRecord("tid", 8, 0, leader=1)])
    assert manager.changed == 2 and manager.fetcher_syncs == syncs + 1
    assert manager.moved[-1] == {("t", 8)}  # the fetchers move that one partition, not every one
    assert manager.partitions[("t", 8)].is_leader
    step(manager, led, [PartitionChangeRecord("tid", 8, 1, isr=(1, 2))])
    assert manager.changed == 3 and manager.fetcher_syncs == syncs + 1  # the ISR of a led partition: no fetcher cares
    assert manager.rechecked == [{("t", 7)}]


def test_a_batch_of_changes_reaches_each_changed_partition_once(manager: Counting) -> None:
    image = start(manager)
    step(manager, image, [PartitionChangeRecord("tid", 3, 0, isr=(2, 1)), PartitionChangeRecord("tid", 3, 1, isr=(2, 1, 3)), PartitionChangeRecord("tid", 4, 0, leader=1)])
    assert manager.changed == 2
    assert manager.partitions[("t", 3)].state.partition_epoch == 2 and manager.partitions[("t", 4)].is_leader


def test_broker_changes_touch_no_replica_but_wake_the_fetchers(manager: Counting) -> None:
    image = start(manager)
    before = (manager.added, manager.changed, manager.fetcher_syncs)
    step(manager, image, [RegisterBrokerRecord(4, -1, "h", 1, "", "i4")])
    assert (manager.added, manager.changed, manager.fetcher_syncs) == (before[0], before[1], before[2] + 1)


def test_a_failed_apply_is_completed_by_the_next(manager: Counting) -> None:
    image = image_with_topic()
    delta = MetadataDelta.from_snapshot(MetadataImage.empty("c"), image)
    manager.fail_adds = 1
    with pytest.raises(OSError):
        asyncio.run(manager.on_metadata(delta, image))
    assert len(manager.partitions) < PARTITIONS
    asyncio.run(manager.on_metadata(delta, image))  # the stream restarts after the last offset applied: the same delta again
    assert len(manager.partitions) == PARTITIONS


def test_deleted_topic_loses_its_replicas(manager: Counting) -> None:
    image = start(manager)
    assert len(list(manager.logs.data_dir.glob("t-*"))) == PARTITIONS
    step(manager, image, [RemoveTopicRecord("tid")])
    assert not manager.partitions and not list(manager.logs.data_dir.glob("t-*"))


def test_a_topic_recreated_in_the_same_batch_starts_empty(manager: Counting) -> None:
    image = start(manager)
    manager.partitions[("t", 0)].log.append(batch(3), assign_offsets=True, leader_epoch=0, now_ms=0)
    step(manager, image, [RemoveTopicRecord("tid"), PartitionRecord("tid2", 0, (1,), (1,), 1, 0, 0), TopicRecord("t", "tid2")])
    assert list(manager.partitions) == [("t", 0)] and manager.topic_ids["t"] == "tid2"
    assert manager.partitions[("t", 0)].log.log_end_offset == 0 and manager.partitions[("t", 0)].is_leader


def test_a_replica_reassigned_away_goes(manager: Counting) -> None:
    image = start(manager)
    step(manager, image, [PartitionChangeRecord("tid", 5, 0, replicas=(2, 3), isr=(2, 3))])
    assert ("t", 5) not in manager.partitions and len(manager.partitions) == PARTITIONS - 1


def test_a_config_change_reaches_the_local_replicas(manager: Counting) -> None:
    image = start(manager)
    step(manager, image, [ConfigRecord("t", "retention.ms", "1234")])
    assert {p.log.settings.retention_ms for p in manager.partitions.values()} == {1234}
    assert manager.changed == 0


def test_a_replica_whose_log_cannot_be_created_is_reported_offline_and_the_rest_applied(manager: Counting, tmp_path: Path) -> None:
    """A real creation failure (a file where the partition's directory must go): every other
    replica is created, the failed one is named in MetadataNotApplied and reported offline,
    and once the cause is gone the next call creates it."""
    (tmp_path / "t-7").write_text("in the way")
    image = image_with_topic()
    with pytest.raises(MetadataNotApplied) as info:
        asyncio.run(manager.on_metadata(MetadataDelta.from_snapshot(MetadataImage.empty("c"), image), image))
    assert list(info.value.failures) == [("t", 7)] and "t-7" in str(info.value.failures[("t", 7)])
    assert len(manager.partitions) == PARTITIONS - 1 and ("t", 7) not in manager.partitions
    assert list(manager.logs.offline_partitions()) == [("t", 7)]

    (tmp_path / "t-7").unlink()
    asyncio.run(manager.on_metadata(MetadataDelta.from_snapshot(image, image), image))
    assert len(manager.partitions) == PARTITIONS and not manager.logs.offline_partitions()


def metadata_batch(image: MetadataImage, records: list) -> pb.MetadataBatch:
    return pb.MetadataBatch(base_offset=image.offset + 1, last_offset=image.offset + len(records), cluster_id="c",
                            controller_id=1, records=[to_proto(r) for r in records])


def test_the_follower_serves_on_past_metadata_it_could_not_apply_and_retries_until_it_can(
    manager: Counting, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follower's image moves past a batch the broker failed to act on (so requests at
    newer offsets are answered, later batches are applied), and its retry creates the missing
    replica as soon as the cause is gone, without a restart."""
    monkeypatch.setattr(controller_link, "RETRY_MIN_S", 0.01)
    follower = MetadataFollower([(1, "127.0.0.1", 1)], manager.on_metadata)
    base = image_with_topic()
    created = [PartitionRecord("tid2", p, (1,), (1,), 1, 0, 0) for p in range(3)] + [TopicRecord("u", "tid2")]
    more = [PartitionRecord("tid3", 0, (1,), (1,), 1, 0, 0), TopicRecord("v", "tid3")]
    (tmp_path / "u-1").write_text("in the way")

    async def scenario() -> None:
        await follower._apply(pb.MetadataBatch(snapshot=True, base_offset=0, last_offset=base.offset, cluster_id="c",
                                               records=[to_proto(r) for r in image_to_records(base)]))
        await follower._apply(metadata_batch(follower.image, created))
        assert "u" in follower.image.topics and follower.unapplied_since == base.offset
        assert {("u", 0), ("u", 2)} <= set(manager.partitions) and ("u", 1) not in manager.partitions
        await follower._apply(metadata_batch(follower.image, more))  # later metadata still applies
        assert ("v", 0) in manager.partitions and follower.unapplied_since == base.offset
        (tmp_path / "u-1").unlink()
        await async_wait_for(lambda: follower.unapplied_since is None, 10, "the retry to apply the missing replica")
        assert ("u", 1) in manager.partitions and not manager.logs.offline_partitions()
        await follower.stop()

    asyncio.run(scenario())


def test_a_replica_taken_offline_makes_its_fetcher_look_at_it(manager: Counting) -> None:
    """The fetchers have no periodic look at every partition: a log going offline tells them."""
    from data_plane.storage.errors import StorageError

    start(manager)
    manager.take_offline(manager.partitions[("t", 5)], StorageError("disk gone", errno=None, path=None))
    assert manager.rechecked == [{("t", 5)}]


def test_a_new_leader_epoch_under_the_same_leader_makes_the_fetcher_look_at_the_partition(manager: Counting) -> None:
    """Without a periodic full look, every change of a followed partition's state must reach
    its fetcher: a leader epoch bumped under the same leader and ISR too."""
    image = start(manager)
    syncs = manager.fetcher_syncs
    step(manager, image, [PartitionChangeRecord("tid", 9, 0, leader=2)])  # the same leader, a new epoch
    assert manager.partitions[("t", 9)].state.leader_epoch == 1 and manager.fetcher_syncs == syncs
    assert manager.rechecked == [{("t", 9)}]


def test_one_info_line_per_metadata_batch_and_no_file_per_new_replica(manager: Counting) -> None:
    """Creating replicas logs one line for the batch, with its counts and metadata offset (each
    replica's own line is debug), and opens no file: a new replica is a directory until its
    first record; a leader's epoch waits for its log's first flush. Logging as a fresh process
    has it: an earlier test may have configured structlog to drop info lines, and a logger it
    cached would not see ``capture_logs``."""
    structlog.reset_defaults()
    with structlog.testing.capture_logs() as logs:
        manager._log = structlog.get_logger("broker.replicas").bind(broker_id=1)
        image = start(manager)
        step(manager, image, [PartitionChangeRecord("tid", 8, 0, leader=1), PartitionChangeRecord("tid", 9, 0, isr=(2, 1))])
    info = [entry for entry in logs if entry["log_level"] != "debug"]
    assert [entry["event"] for entry in info] == ["metadata applied to replicas"] * 2, info
    assert {k: info[0][k] for k in ("metadata_offset", "created", "changed", "leading", "following")} == {
        "metadata_offset": image.offset, "created": PARTITIONS, "changed": 0, "leading": 0, "following": PARTITIONS}
    assert {k: info[1][k] for k in ("created", "changed", "leading", "following")} == {"created": 0, "changed": 2, "leading": 1, "following": 1}
    assert [path for path in manager.logs.data_dir.glob("t-*/*")] == []

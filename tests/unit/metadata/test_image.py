"""apply(): deterministic, all-or-nothing per entry, epochs bumped where they should be, and
snapshots that rebuild an equal image."""

from __future__ import annotations

import pytest

from metadata_quorum import records as r
from metadata_quorum.delta import apply, apply_all, image_from_snapshot
from metadata_quorum.image import MetadataImage, RecordRejected, image_to_records
from kraftlog_proto import common_pb2 as common

from .helpers import cluster, with_topic

HISTORY = [
    r.RegisterBrokerRecord(1, r.NEW_BROKER_EPOCH, "h", 1, "", "i1"),
    r.RegisterBrokerRecord(2, r.NEW_BROKER_EPOCH, "h", 2, "", "i2"),
    r.UnfenceBrokerRecord(1, 1),
    r.UnfenceBrokerRecord(2, 2),
    r.TopicRecord("a", "ida"),
    r.PartitionRecord("ida", 0, (1, 2), (1, 2), 1, 0, 0),
    r.PartitionRecord("ida", 1, (2, 1), (2, 1), 2, 0, 0),
    r.ConfigRecord("a", "retention.ms", "100"),
    r.TopicRecord("b", "idb"),
    r.PartitionRecord("idb", 0, (1,), (1,), 1, 0, 0),
    r.PartitionChangeRecord("ida", 0, 0, isr=(1,)),
    r.PartitionChangeRecord("ida", 0, 1, leader=2, isr=(2,)),
    r.ConfigRecord("a", "retention.ms", None),
    r.ConfigRecord("a", "min.insync.replicas", "2"),
    r.ProducerIdsRecord(1, 1, 1000),
    r.BrokerRegistrationChangeRecord(2, 2, True),
    r.FenceBrokerRecord(1, 1),
    r.RemoveTopicRecord("idb"),
]


def replay(records) -> MetadataImage:
    return apply_all(MetadataImage.empty("c"), records)


def test_same_records_same_image():
    assert replay(HISTORY) == replay(list(HISTORY))
    assert replay(HISTORY).offset == len(HISTORY)


def test_snapshot_records_rebuild_an_equal_image():
    image = replay(HISTORY)
    rebuilt = image_from_snapshot("c", image_to_records(image), image.offset)
    assert rebuilt == image
    assert image_to_records(rebuilt) == image_to_records(image)


def test_broker_epoch_is_the_registration_offset():
    image = replay(HISTORY[:2])
    assert image.brokers[1].epoch == 1 and image.brokers[2].epoch == 2
    assert image.brokers[1].fenced


def test_partition_change_bumps_epochs():
    before = replay(HISTORY[:10])
    isr_only = apply(before, HISTORY[10])
    p = isr_only.partition("a", 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((1,), 1, 0, 1)
    leader_move = apply(isr_only, HISTORY[11])
    p = leader_move.partition("a", 0)
    assert (p.isr, p.leader, p.leader_epoch, p.partition_epoch) == ((2,), 2, 1, 2)


def test_unchanged_sub_images_are_reused():
    before = replay(HISTORY[:10])
    after = apply(before, HISTORY[10])
    assert after.topics["b"] is before.topics["b"]
    assert after.topics["a"].partitions[1] is before.topics["a"].partitions[1]
    assert after.brokers is before.brokers


@pytest.mark.parametrize(
    "record,code",
    [
        (r.PartitionChangeRecord("ida", 0, 5, isr=(1,)), common.INVALID_UPDATE_VERSION),
        (r.PartitionChangeRecord("nope", 0, 0, isr=(1,)), common.UNKNOWN_TOPIC_OR_PARTITION),
        (r.TopicRecord("a", "other"), common.TOPIC_ALREADY_EXISTS),
        (r.FenceBrokerRecord(1, 99), common.STALE_BROKER_EPOCH),
        (r.UnfenceBrokerRecord(9, 1), common.BROKER_NOT_REGISTERED),
        (r.ConfigRecord("missing", "retention.ms", "1"), common.UNKNOWN_TOPIC_OR_PARTITION),
        (r.ProducerIdsRecord(1, 1, 0), common.INVALID_UPDATE_VERSION),
        (r.PartitionChangeRecord("ida", 0, 0, leader=3), common.INELIGIBLE_REPLICA),
        (r.PartitionChangeRecord("ida", 0, 0, isr=(2,)), common.INVALID_REQUEST),
    ],
)
def test_rejected_record_raises_with_code(record, code):
    image = replay(HISTORY[:10])
    with pytest.raises(RecordRejected) as info:
        apply(image, record)
    assert info.value.code == code and info.value.message


def test_fenced_broker_cannot_join_isr():
    image = replay(HISTORY[:10])
    image = apply(image, r.PartitionChangeRecord("ida", 0, 0, isr=(1,)))
    image = apply(image, r.FenceBrokerRecord(2, 2))
    with pytest.raises(RecordRejected) as info:
        apply(image, r.PartitionChangeRecord("ida", 0, 1, isr=(1, 2)))
    assert info.value.code == common.INELIGIBLE_REPLICA


def test_entry_is_all_or_nothing():
    image = replay(HISTORY[:10])
    with pytest.raises(RecordRejected):
        apply_all(image, [r.ConfigRecord("a", "retention.ms", "5"), r.TopicRecord("a", "dup")])
    assert dict(image.configs["a"]) == {"retention.ms": "100"}  # the input image is never modified


def test_image_built_through_decisions_round_trips():
    image = with_topic(cluster(), "orders", 6, 3, {"retention.ms": "1000"})
    assert image_from_snapshot(image.cluster_id, image_to_records(image), image.offset) == image

"""The snapshot's encoded records (metadata_quorum/snapshot_records.py): always exactly the
encoding of ``image_to_records``, re-encoding only the topics that changed."""

from __future__ import annotations

from metadata_quorum.delta import apply_all
from metadata_quorum.image import image_to_records
from metadata_quorum.records import ConfigRecord, PartitionChangeRecord, RemoveTopicRecord, TopicRecord, PartitionRecord, encode
from metadata_quorum.snapshot_records import SnapshotEncoder
from tests.unit.metadata.test_apply_rate import cluster_image


def test_every_snapshot_is_the_images_records_and_only_changed_topics_are_encoded_again() -> None:
    encoder = SnapshotEncoder()
    image = cluster_image(3, 10)
    first = encoder.records(image)
    assert first == [encode(r) for r in image_to_records(image)]
    for changes in ([PartitionChangeRecord("id1", 4, 0, isr=(1, 2))], [ConfigRecord("t2", "retention.ms", "1000")],
                    [RemoveTopicRecord("id0")], [PartitionRecord("id9", 0, (1, 2, 3), (1, 2, 3), 1, 0, 0), TopicRecord("t9", "id9")]):
        image = apply_all(image, changes)
        assert encoder.records(image) == [encode(r) for r in image_to_records(image)], changes


def encoded_partitions(monkeypatch) -> list[tuple[str, int]]:
    """Every (topic id, partition) the encoder encodes from now on."""
    import metadata_quorum.snapshot_records as module

    encoded: list[tuple[str, int]] = []
    original = module.partition_record
    monkeypatch.setattr(module, "partition_record", lambda topic_id, p: encoded.append((topic_id, p.partition)) or original(topic_id, p))
    return encoded


def test_only_the_partition_that_changed_is_encoded_again(monkeypatch) -> None:
    encoder = SnapshotEncoder()
    image = cluster_image(4, 5)
    encoder.records(image)
    encoded = encoded_partitions(monkeypatch)
    changed = apply_all(image, [PartitionChangeRecord("id2", 1, 0, isr=(1, 2))])
    assert encoder.records(changed) == [encode(r) for r in image_to_records(changed)]
    assert encoded == [("id2", 1)]


def test_warming_ahead_leaves_the_compaction_nothing_to_encode(monkeypatch) -> None:
    """``warm`` runs in a worker thread while the metadata changes, so the compaction on the
    Raft thread finds every partition encoded, the first one too."""
    encoder = SnapshotEncoder()
    image = cluster_image(3, 4)
    assert encoder.warm(image) == 3
    assert encoder.warm(image) == 0  # nothing changed since
    encoded = encoded_partitions(monkeypatch)
    assert encoder.records(image) == [encode(r) for r in image_to_records(image)]
    assert encoded == []


def test_a_loaded_snapshot_keeps_its_topics_bytes_so_the_next_compaction_encodes_only_what_changed(monkeypatch) -> None:
    """A restarted or joining controller loads a dump; its first compaction must not encode
    every topic again on the Raft thread (about a second at 100,000 partitions). Negative
    control: without the seed every topic is encoded again."""
    from metadata_quorum.raft_node import MetadataStateMachine

    def state_machine() -> MetadataStateMachine:
        return MetadataStateMachine("c", lambda *_: None, lambda *_: None)

    source = state_machine()
    source.image = apply_all(cluster_image(4, 5), [ConfigRecord("t1", "retention.ms", "1000"),
                                                   PartitionRecord("pending", 0, (1, 2, 3), (1, 2, 3), 1, 0, 0)])
    loaded = state_machine()
    loaded.load_dump(source.capture_dump()())
    encoded = encoded_partitions(monkeypatch)
    changed = apply_all(loaded.image, [PartitionChangeRecord("id2", 1, 0, isr=(1, 2))])
    assert loaded._snapshot.records(changed) == [encode(r) for r in image_to_records(changed)]
    assert encoded == [("id2", 1)]


def test_a_snapshot_not_in_the_expected_order_is_not_kept() -> None:
    """Seeding checks each topic's part starts with that topic's record: bytes from elsewhere
    are never kept for a topic (they would be written into every later snapshot)."""
    image = cluster_image(2, 3)
    records = image_to_records(image)
    shuffled = records[:1] + list(reversed(records[1:]))
    encoder = SnapshotEncoder()
    encoder.seed(image, [encode(r) for r in shuffled], shuffled)
    assert encoder.records(image) == [encode(r) for r in image_to_records(image)]
